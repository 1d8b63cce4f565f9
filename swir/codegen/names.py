"""C identifiers for names that come from models.

swir names (``@conv1.w``, ``%hi_1``, a module called ``"my net; rm -rf"``) may
hold any character a model author or an importer chose. Nothing of them reaches
C, the Makefile or a file path unchanged: every name becomes ``[A-Za-z_]
[A-Za-z0-9_]*``, never a C keyword, never a name the generated code or the
libraries it includes use (``exp``, ``athread_get``, ``swir_...``), at most
``MAX_IDENTIFIER`` characters, and unique in its scope (a clash gets ``_2``,
``_3``, ...). Comments quote original names through :func:`comment_text`, which
cannot close the comment; string literals through :func:`c_string`; messages
the program prints through :func:`display_text` (one printable line); the
program's file name through :func:`file_stem` (a short word that is no
Makefile target or file of the project).
"""

from __future__ import annotations

import re

C_KEYWORDS = frozenset(["auto", "break", "case", "char", "const", "continue", "default", "do", "double", "else", "enum", "extern", "float", "for", "goto", "if", "inline", "int", "long", "register", "restrict", "return", "short", "signed", "sizeof", "static", "struct", "switch", "typedef", "union", "unsigned", "void", "volatile", "while", "_Bool", "_Complex", "_Imaginary", "bool", "true", "false", "_Float16", "asm", "typeof"])

# Names the generated files or the headers they include define or use: libm,
# libc, stdint, the athread API, and the generated code's own fixed names.
LIBRARY_NAMES = frozenset(["main", "argc", "argv", "errno", "stdin", "stdout", "stderr", "printf", "fprintf", "snprintf", "sprintf", "puts", "fopen", "fclose", "fread", "fwrite", "fseek", "ftell", "remove", "rename", "malloc", "calloc", "realloc", "free", "exit", "abort", "memcpy", "memset", "memcmp", "strcmp", "strlen", "strtol", "strtoul", "strtod", "atoi", "size_t", "FILE", "NULL", "EOF", "exp", "expf", "log", "logf", "sqrt", "sqrtf", "pow", "powf", "tanh", "tanhf", "erf", "erff", "erfc", "erfcf", "floor", "floorf", "ceil", "ceilf", "fabs", "fabsf", "fmax", "fmin", "isnan", "isinf", "INFINITY", "NAN", "HUGE_VAL", "int8_t", "int16_t", "int32_t", "int64_t", "uint8_t", "uint16_t", "uint32_t", "uint64_t", "intptr_t", "uintptr_t", "INT8_MIN", "INT16_MIN", "INT32_MIN", "INT64_MIN", "INT8_MAX", "INT16_MAX", "INT32_MAX", "INT64_MAX", "INT64_C", "UINT64_C", "athread_init", "athread_halt", "athread_spawn", "athread_join", "athread_get", "athread_put", "athread_get_id", "athread_syn", "PE_MODE", "BCAST_MODE", "ROW_MODE", "BROW_MODE", "RANK_MODE", "ARRAY_SCOPE", "ROW_SCOPE", "COL_SCOPE", "dma_mode", "SLAVE_FUN", "ldm_malloc", "ldm_free", "_MYID", "_ROW", "_COL", "ldm", "reply", "para", "arg", "p", "weights", "runs", "repeat"])

# The rest of C99's <math.h>, <stdlib.h>, <stdio.h>, <time.h>, and POSIX names
# the runtime calls: a model name equal to one would clash at compile or link time.
LIBRARY_NAMES = LIBRARY_NAMES | frozenset("""
    acos acosh asin asinh atan atan2 atanh cbrt copysign cos cosh exp2 expm1 fdim fma
    fmod frexp hypot ilogb ldexp lgamma llrint llround log10 log1p log2 logb lrint lround
    modf nan nearbyint nextafter nexttoward remainder remquo rint round scalbln scalbn sin
    sinh tan tgamma trunc fpclassify isfinite isnormal signbit isgreater isless
    abs labs llabs div ldiv lldiv rand srand atof atol atoll strtoll strtoull strtof strtold
    bsearch qsort getenv system atexit at_quick_exit quick_exit _Exit aligned_alloc
    fflush freopen setbuf setvbuf fgetc fgets fputc fputs getc getchar gets putc putchar
    ungetc fgetpos fsetpos rewind clearerr feof ferror perror tmpfile tmpnam scanf sscanf
    fscanf vprintf vfprintf vsprintf vsnprintf
    time clock difftime mktime asctime ctime gmtime localtime strftime timezone daylight
    tzname nanosleep sleep usleep read write open close pipe fork signal raise
    setjmp longjmp va_list va_start va_end va_arg va_copy assert offsetof ptrdiff_t wchar_t
    posix_memalign sysconf environ
""".split())

# What the Sunway toolchain's athread.h and slave.h (and share.h, which both
# include) declare at file scope, as public copies show them
# (qzwlecr/stencil-computation include/): types, enum constants, variables and
# macros a generated name must not redefine (the exact-prototype headers of the
# emulation and of the Sunway dialect check declare `scope`; the check's also
# the rest of athread.h's and slave.h's). athread_*, slave_*, __* and _X are
# reserved by prefix below.
LIBRARY_NAMES = LIBRARY_NAMES | frozenset("""
    scope DMA_OP DMA_PUT DMA_GET DMA_PUT_P DMA_GET_P DMA_BARRIER
    START_ADDR start_routine en_get_user_mod EN_GET_USER_MODE sys_m_en malloc_cross
    get_tdata_slave_addr h2ldm IO_addr PRINT RPCC RTC updt_addw updt_subw updt_addw_i
    updt_subw_i atomic_inc1_w atomic_inc1_l
    LDM_SIZE LDM_SIZE_8 SIGCORE MAX_CORES MAX_THREADS BitGet BitSet BitClr BitCount SIGEXPT
    CG_NUM s_thread_info s_core_type s_msg boolean
    UNALIGN ILLEGAL FPE IOV PCOV CLASSE SELLDWE DFLOWE IFLOWE ATOMOV SBMDE SYNE RCE CHANNAL
    SRSETE IOE OUTRANK MTAG OVI INE OVF UNF DZE INV DNO DBZ RCSRINV LDME OTHERS MEMANS CODC
    CLASS_ST SDLBE MEMOV NOMEMTARG RESPERR MATCHE CMBIO CMBCK OTHER NOSELF SWITHNO WRCHE DMAE
    DMAW DMAMEM DMALDM ANSWD CHNO SYNVEC CLASSE1 CLASSE2 MABC MATNO RAMAR SBMDE1 SBMDE2 SYNE1
    SYNE2 DMAE1 DMAE2 DMAE3 DMAE4 DMAE5 IOE1 IOE2 IOE3 OTHERE
""".split())

# C99 7.26 reserves these prefixes for the library (str, mem, is, to and E..
# followed by a letter, SIG, LC_, PRI, SCN); POSIX adds pthread_, clock_,
# sched_, sem_, timer_; athread and swir's own names complete the list.
_RESERVED_PREFIXES = ("swir_", "SWIR_", "athread_", "slave_", "__", "_Z", "pthread_",
                      "clock_", "sched_", "sem_", "timer_", "SIG", "LC_", "PRI", "SCN")
_RESERVED_PATTERN = re.compile(r"^(str|mem|is|to|wcs)[a-z]|^E[0-9A-Z]|^_[A-Z]|_t$")
_BAD = re.compile(r"[^A-Za-z0-9_]")

# Longest C name made from a model name, before a uniqueness suffix: C99 promises
# 63 significant characters in an internal identifier (5.2.4.1), and a 5000-
# character ONNX name makes no better C name than its first few dozen characters.
MAX_IDENTIFIER = 48
# Longest program file name stem (a file name is at most 255 bytes, and
# `make emu` adds "_emu_asan").
MAX_STEM = 64
# Stems that would be a Makefile target (all, emu, clean), a file make reads
# itself (Makefile, makefile, GNUmakefile) or a file or directory of the project
# (emu/, main.c's program "main", layers*, weights.bin). Compared ignoring case
# (case-insensitive file systems).
_RESERVED_STEMS = frozenset(["all", "emu", "clean", "makefile", "gnumakefile", "main", "layers",
                             "layers_mix", "layers_slave", "weights"])


def c_identifier(name: str, fallback: str = "v") -> str:
    """``name`` with every character outside [A-Za-z0-9_] replaced by '_', never
    empty, never starting with a digit and at most MAX_IDENTIFIER characters
    long (no uniqueness: see :class:`Scope`)."""
    text = _BAD.sub("_", name)
    if not text or not text.strip("_"):
        text = fallback + text
    if text[0].isdigit():
        text = fallback + text
    if len(text) <= MAX_IDENTIFIER:
        return text
    # Head and tail: exporters' long names often differ only at the end
    # ("/encoder/layer.11/attention/MatMul" vs ".../MatMul_1").
    half = (MAX_IDENTIFIER - 1) // 2
    return text[:MAX_IDENTIFIER - 1 - half] + "_" + text[-half:]


def _reserved(name: str) -> bool:
    return (name in C_KEYWORDS or name in LIBRARY_NAMES
            or name.startswith(_RESERVED_PREFIXES) or _RESERVED_PATTERN.search(name) is not None)


class Scope:
    """Unique, safe C names for the things declared in one C scope.

    ``outer`` scopes' names are avoided too, so a local never shadows a function
    or global it might need (a value named ``%exp`` must not hide ``exp()``)."""

    def __init__(self, outer: Scope | None = None) -> None:
        self.outer = outer
        self._taken: set[str] = set()
        self._own: set[str] = set()     # reserved here only, free in inner scopes
        self._of: dict[object, str] = {}

    def _used(self, name: str) -> bool:
        if name in self._own:
            return True
        s: Scope | None = self
        while s is not None:
            if name in s._taken:
                return True
            s = s.outer
        return False

    def declare(self, name: str, key: object = None, fallback: str = "v") -> str:
        """A fresh C name derived from ``name``; ``key`` (optional) remembers it."""
        base = c_identifier(name, fallback)
        if _reserved(base):
            base = base.lstrip("_") + "_" if not base.startswith("_") else fallback + base
            if _reserved(base):
                base = fallback + "_" + base
        text, n = base, 1
        while self._used(text):
            n += 1
            text = f"{base}_{n}"
        self._taken.add(text)
        if key is not None:
            self._of[id(key)] = text
        return text

    def reserve(self, *names: str, inner: bool = True) -> None:
        """Names the generator itself uses in this scope (and, unless ``inner``
        is false, in the scopes nested in it)."""
        (self._taken if inner else self._own).update(names)

    def lookup(self, key: object) -> str:
        s: Scope | None = self
        while s is not None:
            if id(key) in s._of:
                return s._of[id(key)]
            s = s.outer
        raise KeyError(key)


def _printable(ch: str) -> str:
    """One character as printable ASCII: itself, or a backslash escape."""
    o = ord(ch)
    return (ch if " " <= ch <= "~" else f"\\x{o:02x}" if o < 256
            else f"\\u{o:04x}" if o < 0x10000 else f"\\U{o:08x}")


def comment_text(text: str) -> str:
    """Text safe inside a C block comment and on one line: no '*/', no '/*',
    no newlines, no trigraph-like '??', nothing outside printable ASCII."""
    s = "".join(_printable(ch) for ch in text)
    return s.replace("*/", "* /").replace("/*", "/ *").replace("??", "?\\?")


def display_text(text: str, limit: int = 80) -> str:
    """``text`` as one line of printable ASCII for a message the generated
    program prints (no newline, no terminal escape sequence, non-ASCII
    escaped), cut to at most ``limit`` characters with "..."."""
    pieces = [_printable(ch) for ch in text]
    if sum(map(len, pieces)) <= limit:
        return "".join(pieces)
    out, n = [], 0
    for piece in pieces:      # cut between escapes, never inside one
        if n + len(piece) > limit - 3:
            break
        out.append(piece)
        n += len(piece)
    return "".join(out) + "..."


def c_string(text: str) -> str:
    """A C string literal holding ``text`` (UTF-8), every risky byte escaped.
    Two things a C string cannot hold are spelled out instead: a NUL (which
    would end it early) as the two characters ``\\0``, and a lone surrogate
    (no UTF-8) as ``\\udc80``."""
    out = ['"']
    for b in text.replace("\0", "\\0").encode("utf-8", "backslashreplace"):
        ch = chr(b)
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch == "?":
            out.append("\\?")   # no trigraphs
        elif 32 <= b < 127:
            out.append(ch)
        else:
            out.append(f"\\{b:03o}")
    out.append('"')
    return "".join(out)


def file_stem(name: str) -> str:
    """A module name as a file-name stem and Makefile word: [A-Za-z0-9_] only,
    at most MAX_STEM characters, never a Makefile target or a file the project
    holds (``emu`` would be the emu/ directory, ``Makefile`` the makefile)."""
    text = _BAD.sub("_", name).strip("_")[:MAX_STEM].rstrip("_") or "model"
    if text.lower() in _RESERVED_STEMS:
        text += "_model"
    return text
