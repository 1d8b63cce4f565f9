/* ---- Program support: errors, memory, files, options ------------------ */

static const char *program = "program";

/* Outputs being written (see write_outputs): removed if the program fails. */
struct output;
static struct output *pending;
#if defined(SWIR_RANKS) && defined(SWIR_EMU)
static char *ranks_stats_text;
#endif
static long n_pending;
static void remove_temporaries(void);
#ifdef SWIR_RANKS
static void abort_ranks(void);
#endif
/* The ranks (program_ranks.c in an MPI program; at the end for one core group). */
static int first_rank(void);
static void end_ranks(void);

static void fail(const char *format, ...) __attribute__((format(printf, 1, 2), noreturn));
static void fail(const char *format, ...)
{
    va_list args;
    va_start(args, format);
    fprintf(stderr, "%s: error: ", program);
    vfprintf(stderr, format, args);
    fputc('\n', stderr);
    va_end(args);
    remove_temporaries();
#ifdef SWIR_RANKS
    abort_ranks();      /* every rank exits: none is left waiting in a collective */
#endif
    exit(1);
}

/* Every block of main memory, 64-byte aligned, kept to be freed at exit. */
static void **blocks;
static long n_blocks;

static void *alloc_block(size_t bytes, const char *what)
{
    unsigned char *raw = malloc(bytes + 64);
    void **grown = realloc(blocks, (size_t)(n_blocks + 1) * sizeof *blocks);
    if (raw == NULL || grown == NULL)
        fail("out of memory allocating %s (%ld bytes)", what, (long)bytes);
    blocks = grown;
    blocks[n_blocks++] = raw;
    unsigned char *p = raw + (64 - (uintptr_t)raw % 64) % 64;
    /* Poison: memory nothing wrote reads as NaN (0x7FFA...), as in swir-run. */
    for (size_t i = 0; i < bytes; i++)
        p[i] = i % 2 ? 0x7F : 0xFA;
    SWIR_MEMORY(p, bytes, what);
    return p;
}

static void free_blocks(void)
{
    for (long i = 0; i < n_blocks; i++)
        free(blocks[i]);
    free(blocks);
}

/* What the program reads or writes: a parameter or result of the entry
 * function, as raw little-endian bytes in C order, or as a .npy file. */
struct port {
    const char *name;   /* the swir parameter */
    const char *type;   /* its swir type */
    size_t bytes;       /* raw little-endian, C order */
    const char *descr;  /* the .npy dtype ('<f4') */
    int rank;
    const long *shape;
};

static int has_suffix(const char *path, const char *suffix)
{
    size_t n = strlen(path), k = strlen(suffix);
    return n >= k && strcmp(path + n - k, suffix) == 0;
}

/* ---- Inputs: opened and size-checked before any memory is allocated ----- */

/* A .npy header's fields: the text after `'key':` (quotes of either kind). */
static const char *npy_field(const char *header, const char *key)
{
    char quoted[32];
    for (int q = 0; q < 2; q++) {
        snprintf(quoted, sizeof quoted, q ? "\"%s\"" : "'%s'", key);
        const char *at = strstr(header, quoted);
        if (at != NULL) {
            at += strlen(quoted);
            while (*at == ' ')
                at++;
            if (*at == ':') {
                at++;
                while (*at == ' ')
                    at++;
                return at;
            }
        }
    }
    return NULL;
}

/* Check that an open .npy file holds the port's dtype in C order with the
 * port's shape (dimensions of size 1 aside: (3, 224, 224) fills
 * (1, 3, 224, 224)); return the offset of its data. */
static long npy_data_offset(FILE *f, const char *path, const struct port *p, const char *what)
{
    unsigned char magic[10];
    if (fread(magic, 1, 8, f) != 8 || memcmp(magic, "\x93NUMPY", 6) != 0)
        fail("%s '%s' is not a .npy file (no \\x93NUMPY header)", what, path);
    unsigned long length;
    long start;
    if (magic[6] == 1) {
        if (fread(magic + 8, 1, 2, f) != 2)
            fail("%s '%s': truncated .npy header", what, path);
        length = magic[8] | (unsigned long)magic[9] << 8;
        start = 10;
    } else if (magic[6] == 2 || magic[6] == 3) {
        unsigned char n[4];
        if (fread(n, 1, 4, f) != 4)
            fail("%s '%s': truncated .npy header", what, path);
        length = n[0] | (unsigned long)n[1] << 8 | (unsigned long)n[2] << 16
                 | (unsigned long)n[3] << 24;
        start = 12;
    } else {
        fail("%s '%s': .npy format version %d.%d is not supported", what, path, magic[6],
             magic[7]);
    }
    if (length > 65536)
        fail("%s '%s': .npy header of %lu bytes is too long", what, path, length);
    char *header = malloc(length + 1);
    if (header == NULL)
        fail("out of memory");
    if (fread(header, 1, length, f) != length)
        fail("%s '%s': truncated .npy header", what, path);
    header[length] = '\0';
    const char *descr = npy_field(header, "descr");
    const char *order = npy_field(header, "fortran_order");
    const char *shape = npy_field(header, "shape");
    if (descr == NULL || order == NULL || shape == NULL || *shape != '(')
        fail("%s '%s': malformed .npy header", what, path);
    size_t k = strlen(p->descr);
    if (strncmp(descr + 1, p->descr, k) != 0 || descr[k + 1] != descr[0]) {
        const char *close = strchr(descr + 1, descr[0]);
        int n = close != NULL && close - descr < 16 ? (int)(close - descr - 1) : 0;
        fail("%s '%s' holds dtype '%.*s'; %s needs '%s'", what, path, n, descr + 1, p->type,
             p->descr);
    }
    if (strncmp(order, "False", 5) != 0)
        fail("%s '%s' is in Fortran order; write it in C order", what, path);
    long dims[64];
    int rank = 0;
    for (const char *s = shape + 1; *s != ')';) {
        char *end;
        long d = strtol(s, &end, 10);
        if (end == s || d < 0 || rank == 64)
            fail("%s '%s': malformed .npy shape", what, path);
        if (d != 1)
            dims[rank++] = d;
        s = end;
        while (*s == ' ' || *s == ',' || *s == 'L')
            s++;
    }
    int want = 0, same = 1;
    for (int i = 0; i < p->rank; i++)
        if (p->shape[i] != 1)
            same &= want < rank && dims[want++] == p->shape[i];
    if (!same || want != rank) {
        const char *close = strchr(shape, ')');
        int n = close != NULL && close - shape < 200 ? (int)(close - shape + 1) : 0;
        fail("%s '%s' has shape %.*s; expected the shape of %s", what, path, n, shape, p->type);
    }
    free(header);
    return start + (long)length;
}

/* Open an input and check its size: exactly the port's bytes (after the
 * header of a .npy file, whose dtype and shape must match). The file is left
 * open at its data: nothing is allocated before every input is checked. */
static FILE *open_input(const char *path, const struct port *p, const char *what, int npy)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        fail("cannot open %s '%s': %s", what, path, strerror(errno));
    long start = npy && has_suffix(path, ".npy") ? npy_data_offset(f, path, p, what) : 0;
    long size = -1;
    if (fseek(f, 0, SEEK_END) == 0)
        size = ftell(f);
    if (size < 0 || size == LONG_MAX || fseek(f, start, SEEK_SET) != 0)
        fail("cannot read %s '%s' (not a regular file?)", what, path);
    if ((size_t)(size - start) != p->bytes) {
        unsigned char head[6] = {0};
        int looks_npy = start == 0 && fseek(f, 0, SEEK_SET) == 0
                        && fread(head, 1, 6, f) == 6 && memcmp(head, "\x93NUMPY", 6) == 0;
        fail("%s '%s' has %ld bytes%s; expected %ld%s", what, path, size - start,
             start ? " of data" : "", (long)p->bytes,
             looks_npy ? " (it is a .npy file: give it a .npy name)" : "");
    }
    return f;
}

/* "input 2 (NAME : TYPE)", for messages about input i. */
static const char *input_what(char *buf, size_t size, long i, const struct port *p)
{
    snprintf(buf, size, "input %ld (%s : %s)", i + 1, p->name, p->type);
    return buf;
}

static void read_input(FILE *f, void *dst, size_t bytes, const char *path, const char *what)
{
    if (bytes && fread(dst, 1, bytes, f) != bytes)
        fail("cannot read %s '%s'", what, path);
    fclose(f);
}

/* ---- Outputs: all or nothing, never destroying what a path names --------
 * A regular file, or a path that does not exist, is written to a temporary
 * file beside it and renamed over it once every output is written (if a
 * rename fails, the files already replaced are put back); a symlink is
 * followed (the file it points to is replaced, the link stays); a device or a
 * FIFO (/dev/null, a named pipe) is written straight into, and a path naming
 * one of the program's descriptors (/dev/stdout, /dev/fd/N, or a symlink to
 * one) into that descriptor. A replaced file keeps its permission bits; a new
 * one gets 0666 & ~umask. */

struct output {
    const char *path;       /* as given */
    char *target;           /* symlinks followed */
    char *tmp;              /* the temporary file while it is written */
    char *old;              /* a second name of the file replaced, until all are */
    int placed;             /* renamed into place */
    int stream;             /* a device, FIFO or descriptor */
    mode_t mode;
    const struct port *port;    /* what to write; NULL: the emulation's counters */
    const void *data;
};

static char *copy_text(const char *text)
{
    char *copy = malloc(strlen(text) + 1);
    if (copy == NULL)
        fail("out of memory");
    return strcpy(copy, text);
}

/* The N of /dev/stdout (1), /dev/stderr (2), /dev/fd/N, /proc/self/fd/N; else -1. */
static int descriptor_number(const char *path)
{
    if (strcmp(path, "/dev/stdout") == 0)
        return 1;
    if (strcmp(path, "/dev/stderr") == 0)
        return 2;
    const char *n = strncmp(path, "/dev/fd/", 8) == 0 ? path + 8
                    : strncmp(path, "/proc/self/fd/", 14) == 0 ? path + 14 : NULL;
    if (n == NULL || *n < '0' || *n > '9')
        return -1;
    char *end;
    long fd = strtol(n, &end, 10);
    return *end == '\0' && fd <= INT_MAX ? (int)fd : -1;
}

/* The descriptor a path names, itself or through symlinks (a link to
 * /dev/stdout leads to /proc/self/fd/1), else -1: written into that
 * descriptor, whatever file it is (replacing a file a shell redirected stdout
 * to would leave the shell's descriptor on the old file). */
static int open_descriptor(const char *path)
{
    char p[4096], link[4096];
    if (strlen(path) >= sizeof p)
        return -1;
    strcpy(p, path);
    for (int hop = 0; hop < 40; hop++) {
        int fd = descriptor_number(p);
        if (fd >= 0)
            return fd;
        ssize_t n = readlink(p, link, sizeof link - 1);
        if (n < 0)
            return -1;                          /* not a symlink */
        link[n] = '\0';
        char *slash = strrchr(p, '/');
        size_t keep = link[0] == '/' || slash == NULL ? 0 : (size_t)(slash - p) + 1;
        if (keep + (size_t)n >= sizeof p)
            return -1;
        strcpy(p + keep, link);
    }
    return -1;
}

/* `dir/.NAME.SUFFIXXXXXXX` beside target (NAME cut to 200 bytes, so a long
 * name still leaves room), for mkstemp. */
static char *name_beside(const char *target, const char *suffix)
{
    const char *slash = strrchr(target, '/');
    size_t dir = slash ? (size_t)(slash - target) + 1 : 0;
    size_t base = strlen(target + dir);
    base = base > 200 ? 200 : base;
    char *name = malloc(dir + base + strlen(suffix) + 10);
    if (name == NULL)
        fail("out of memory");
    sprintf(name, "%.*s.%.*s%sXXXXXX", (int)dir, target, (int)base, target + dir, suffix);
    return name;
}

/* Decide where output `path` goes and check it can be written (before the
 * run, which may be long). */
static void check_output(struct output *o, const char *path)
{
    struct stat st;
    o->path = path;
    if (open_descriptor(path) >= 0) {
        o->stream = 1;
        o->target = copy_text(path);
        return;
    }
    if (stat(path, &st) == 0) {
        if (S_ISDIR(st.st_mode))
            fail("cannot write output '%s': it is a directory", path);
        if (S_ISSOCK(st.st_mode))
            fail("cannot write output '%s': it is a socket", path);
        o->stream = !S_ISREG(st.st_mode);
        o->target = o->stream ? copy_text(path) : realpath(path, NULL);
        if (o->target == NULL)
            fail("cannot write output '%s': %s", path, strerror(errno));
        o->mode = st.st_mode & 07777;
    } else if (errno == ENOENT && lstat(path, &st) == 0) {
        o->stream = 1;      /* a symlink to nothing yet: write through it */
        o->target = copy_text(path);
    } else if (errno == ENOENT) {
        mode_t mask = umask(0);
        umask(mask);
        o->mode = 0666 & ~mask;
        char *dir = copy_text(path);
        char *slash = strrchr(dir, '/');
        if (slash == NULL)
            strcpy(dir, ".");
        else
            slash[slash == dir] = '\0';
        char *real = realpath(dir, NULL);
        if (real == NULL || access(real, W_OK | X_OK) != 0)
            fail("cannot write output '%s': %s", path, strerror(errno));
        const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
        o->target = malloc(strlen(real) + strlen(base) + 2);
        if (o->target == NULL)
            fail("out of memory");
        sprintf(o->target, "%s/%s", real, base);
        free(real);
        free(dir);
    } else {
        fail("cannot write output '%s': %s", path, strerror(errno));
    }
}

/* Two outputs naming the same file would keep only the last. */
static void check_distinct(const struct output *outs, long n)
{
    for (long i = 0; i < n; i++)
        for (long j = i + 1; j < n; j++)
            if (!outs[i].stream && !outs[j].stream && strcmp(outs[i].target, outs[j].target) == 0)
                fail("'%s' and '%s' are the same file; give each output its own", outs[i].path,
                     outs[j].path);
}

static void remove_temporaries(void)
{
    for (long i = 0; i < n_pending; i++) {
        if (pending[i].old != NULL)      /* put back what a rename replaced */
            rename(pending[i].old, pending[i].target);
        else if (pending[i].placed)      /* and take away what was new */
            remove(pending[i].target);
        if (pending[i].tmp != NULL)
            remove(pending[i].tmp);
    }
}

static int write_npy_header(FILE *f, const struct port *p)
{
    char text[1024];
    int n = snprintf(text, sizeof text, "{'descr': '%s', 'fortran_order': False, 'shape': (",
                     p->descr);
    for (int i = 0; i < p->rank && n < 900; i++)
        n += snprintf(text + n, sizeof text - (size_t)n, "%ld%s", p->shape[i],
                      p->rank == 1 ? "," : i + 1 < p->rank ? ", " : "");
    n += snprintf(text + n, sizeof text - (size_t)n, "), }");
    int total = (10 + n + 1 + 63) / 64 * 64;    /* header padded to 64 bytes */
    unsigned char head[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0};
    head[8] = (unsigned char)((total - 10) & 0xff);
    head[9] = (unsigned char)((total - 10) >> 8);
    if (fwrite(head, 1, 10, f) != 10 || fwrite(text, 1, (size_t)n, f) != (size_t)n)
        return -1;
    for (int i = 10 + n; i < total - 1; i++)
        fputc(' ', f);
    return fputc('\n', f) == EOF ? -1 : 0;
}

static int write_content(FILE *f, const struct output *o, int runs)
{
    if (o->port == NULL) {
#if defined(SWIR_RANKS) && defined(SWIR_EMU)
        (void)runs;         /* every rank's counters, gathered before (ranks_stats) */
        return fputs(ranks_stats_text, f) == EOF ? -1 : 0;
#elif defined(SWIR_EMU)
        return swir_emu_write_stats_to(f, runs);
#else
        (void)runs;
        return -1;
#endif
    }
    if (has_suffix(o->path, ".npy") && write_npy_header(f, o->port) != 0)
        return -1;
    return fwrite(o->data, 1, o->port->bytes, f) == o->port->bytes ? 0 : -1;
}

/* A new file beside o's target (mkstemp), its name in *name; its descriptor. */
static int new_beside(struct output *o, const char *suffix, char **name)
{
    *name = name_beside(o->target, suffix);
    int fd = mkstemp(*name);
    if (fd < 0) {
        free(*name);
        *name = NULL;
        fail("cannot write output '%s': %s", o->path, strerror(errno));
    }
    return fd;
}

/* Keep a second name of the file a rename will replace (a hard link; a
 * rename where the file system has none), to put it back on failure. */
static void keep_old(struct output *o)
{
    close(new_beside(o, "old", &o->old));
    remove(o->old);
    if (link(o->target, o->old) != 0 && rename(o->target, o->old) != 0) {
        free(o->old);
        o->old = NULL;
    }
}

/* Write every output: files to temporaries beside them, devices, FIFOs and
 * descriptors straight, then rename the temporaries into place. */
static void write_outputs(struct output *outs, long n, int runs)
{
    pending = outs;
    n_pending = n;
    for (long i = 0; i < n; i++) {
        struct output *o = &outs[i];
        if (o->stream)
            continue;
        int fd = new_beside(o, "tmp", &o->tmp);
        FILE *f = fdopen(fd, "wb");
        if (f == NULL || fchmod(fd, o->mode) != 0 || write_content(f, o, runs) != 0
            || ferror(f) || fclose(f) != 0)
            fail("cannot write output '%s': %s", o->path, strerror(errno));
    }
    for (long i = 0; i < n; i++) {
        struct output *o = &outs[i];
        if (!o->stream)
            continue;
        int own = open_descriptor(o->target);   /* /dev/stdout: share its offset */
        if (own >= 0)
            fflush(NULL);
        FILE *f = own >= 0 ? fdopen(dup(own), "wb") : fopen(o->target, "wb");
        if (f == NULL || write_content(f, o, runs) != 0 || ferror(f) || fclose(f) != 0)
            fail("cannot write output '%s': %s", o->path, strerror(errno));
    }
    for (long i = 0; i < n; i++) {
        struct output *o = &outs[i];
        if (o->tmp == NULL)
            continue;
        if (access(o->target, F_OK) == 0)
            keep_old(o);
        if (rename(o->tmp, o->target) != 0)
            fail("cannot write output '%s': %s", o->path, strerror(errno));
        o->placed = 1;
        free(o->tmp);
        o->tmp = NULL;
    }
    n_pending = 0;                      /* all in place: nothing to put back */
    for (long i = 0; i < n; i++) {
        if (outs[i].old != NULL)
            remove(outs[i].old);
        free(outs[i].old);
        free(outs[i].target);
    }
}

/* ---- Options ------------------------------------------------------------- */

struct options {
    const char **inputs;
    const char **outputs;
    long n_inputs, n_outputs, repeat;
    int scatter;                /* --scatter: rank 0 reads the inputs and scatters them */
    const char *stats;
    const char *weights;
    char *weights_default;
};

static void usage(FILE *to)
{
    fprintf(to, "usage: %s --input FILE ... [--output FILE ...] [--stats FILE.json] "
                "[--repeat N] [--weights FILE] [--scatter]\n"
                "Inputs and outputs are in the order of the function's parameters: a FILE "
                "named\n*.npy is a NumPy array (dtype and shape checked), any other a raw "
                "little-endian\narray in C order; --stats needs the emulation build "
                "(make emu). --scatter (a program for\nseveral ranks sharing the batch): rank 0 "
                "reads the inputs and scatters them, for\nfiles the other ranks cannot see.\n",
            program);
}

static void parse_options(int argc, char **argv, struct options *o)
{
    o->inputs = calloc((size_t)argc, sizeof *o->inputs);
    o->outputs = calloc((size_t)argc, sizeof *o->outputs);
    if (o->inputs == NULL || o->outputs == NULL)
        fail("out of memory");
    o->repeat = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            if (first_rank())
                usage(stdout);
            end_ranks();
            exit(0);
        }
        if (strcmp(a, "--scatter") == 0) {
#if defined(SWIR_RANKS) && SWIR_SPLIT_DATA
            o->scatter = 1;
            continue;
#else
            fail("--scatter: only a program whose ranks share the batch reads its inputs on "
                 "one rank and scatters them (swir-cg --ranks N --split data)");
#endif
        }
        if (i + 1 >= argc)
            fail("%s: unknown option or missing value (see --help)", a);
        const char *v = argv[++i];
        if (strcmp(a, "--input") == 0)
            o->inputs[o->n_inputs++] = v;
        else if (strcmp(a, "--output") == 0)
            o->outputs[o->n_outputs++] = v;
        else if (strcmp(a, "--stats") == 0)
            o->stats = v;
        else if (strcmp(a, "--weights") == 0)
            o->weights = v;
        else if (strcmp(a, "--repeat") == 0) {
            char *end;
            o->repeat = strtol(v, &end, 10);
            if (*v == '\0' || *end != '\0' || o->repeat < 1 || o->repeat > 1000000000)
                fail("--repeat needs a count from 1 to 1000000000, got '%s'", v);
        } else
            fail("unknown option '%s' (see --help)", a);
    }
#ifndef SWIR_EMU
    if (o->stats != NULL)
        fail("--stats needs the emulation build (make emu)");
#endif
    if (o->weights == NULL) {   /* default: weights.bin beside the program */
        const char *slash = strrchr(argv[0], '/');
        size_t dir = slash ? (size_t)(slash - argv[0]) + 1 : 0;
        o->weights_default = malloc(dir + sizeof "weights.bin");
        if (o->weights_default == NULL)
            fail("out of memory");
        memcpy(o->weights_default, argv[0], dir);
        memcpy(o->weights_default + dir, "weights.bin", sizeof "weights.bin");
        o->weights = o->weights_default;
    }
}

#ifndef SWIR_RANKS
/* ---- One core group: this process is the whole program ------------------ */

#define ROOT 1                  /* reads the inputs and writes the outputs */
#define SHARE 1                 /* the batch of a rank: all of it */
static int first_rank(void) { return 1; }
static void start_ranks(int *argc, char ***argv) { (void)argc; (void)argv; }
static void read_share(FILE *f, void *mine, const struct port *p, const char *path,
                       const char *what, int scatter)
{ (void)scatter; read_input(f, mine, p->bytes, path, what); }
static void collect_output(const void *mine, void *whole, size_t bytes)
{ (void)mine; (void)whole; (void)bytes; }
static void ranks_stats(int runs) { (void)runs; }
static void end_ranks(void) {}
#endif
