# lit configuration: every .swir file under test/ with RUN lines is a test.
# The tools (swir-opt, ...) and filecheck come from the environment where swir
# is installed (see README: .ci/run installs them into a fresh venv).
import atexit
import os
import shutil
import sys
import tempfile

import lit.formats

config.name = "swir"
# lit 23 rejects ShTest(True); the internal shell handles pipes, `not` and %s.
config.test_format = lit.formats.ShTest(execute_external=False)
# .swir: IR tests; .test: tests whose input is not IR (ONNX models made by a script)
config.suffixes = [".swir", ".test"]
config.test_source_root = os.path.dirname(__file__)
# Temporary files (%t) go outside the source tree: $SWIR_LIT_OUTPUT, or a new
# folder in the system's temporary directory, removed when lit ends.
config.test_exec_root = os.environ.get("SWIR_LIT_OUTPUT") or tempfile.mkdtemp(prefix="swir-lit-")
if "SWIR_LIT_OUTPUT" not in os.environ:
    atexit.register(shutil.rmtree, config.test_exec_root, ignore_errors=True)
config.excludes = ["Inputs", "unit", "Output"]  # Inputs/ folders anywhere hold data, not tests
config.environment["PATH"] = os.environ.get("PATH", "")
for var in ("HOME", "TMPDIR", "LANG", "LC_ALL"):
    if var in os.environ:
        config.environment[var] = os.environ[var]
# The filecheck package provides `filecheck`; tests may also write FileCheck.
config.substitutions.append(("FileCheck", "filecheck"))
config.substitutions.append(("%inputs", os.path.join(config.test_source_root, "Inputs")))
# The Python lit runs under: the venv's, where onnx is installed with swir's test extra.
config.substitutions.append(("%python", sys.executable))
# The Sunway dialect check's stand-in for sw5cc (docs/codegen.md): a test that
# builds a project also runs `make -C DIR all SW5CC=%sw5cc`.
config.substitutions.append(("%sw5cc", os.path.join(config.test_source_root, "sunway", "sw5cc")))
# ... and the SW26010-Pro's: `make -C DIR all SWGCC=%swgcc`.
config.substitutions.append(("%swgcc", os.path.join(config.test_source_root, "sunway", "swgcc")))

for tool in ("swir-opt", "swir-run", "swir-cg", "swir-import", "filecheck"):
    if shutil.which(tool, path=config.environment["PATH"]) is None:
        lit_config.fatal(f"'{tool}' is not on PATH: install swir with its test extra "
                         "(pip install '.[test]')")

# MPI (Open MPI's mpicc and mpirun) for the programs of several core groups: a
# test that builds or runs one says `REQUIRES: mpi`. Where MPI is missing such
# a test is unsupported, unless SWIR_REQUIRE_MPI is set (scripts/test sets it
# and installs MPI): then a missing MPI is an error, as in the unit tests.
if all(shutil.which(t, path=config.environment["PATH"]) for t in ("mpicc", "mpirun")):
    config.available_features.add("mpi")
elif os.environ.get("SWIR_REQUIRE_MPI"):
    lit_config.fatal("SWIR_REQUIRE_MPI is set but mpicc or mpirun is not on PATH: "
                     "install Open MPI (openmpi-bin, libopenmpi-dev)")
