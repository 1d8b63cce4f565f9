# The benchmarks, run by hand (each prints Markdown tables; docs/performance.md
# keeps the results with the machine and date). Tests: bash scripts/test.
# PYTHON is a Python with swir installed with its bench extra (pip install '.[bench]').
PYTHON ?= .venv/bin/python

bench:
	$(PYTHON) bench/parse_print.py
	$(PYTHON) bench/zoo.py --run all
	$(PYTHON) bench/plan_quality.py --kernels resnet18
	$(PYTHON) bench/compile_time.py
	$(PYTHON) bench/ir_throughput.py

# docs/reliability.md: the long fuzz campaign and the 20,000-op model.
reliability:
	$(PYTHON) bench/fuzz.py --parser 100000 --importer 10000 --run-inputs 10000
	$(PYTHON) bench/scale.py

.PHONY: bench reliability
