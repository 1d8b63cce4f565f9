/* ---- Program support: errors, memory, files, options ------------------ */

/* sigaction (POSIX); the results printed: isfinite, ldexp, int16_t */
#include <math.h>
#include <signal.h>
#include <stdint.h>

static const char *program = "program";

/* Outputs being written (see write_outputs): removed if the program fails. */
struct output;
static struct output *pending;
#if defined(SWIR_RANKS) && defined(SWIR_EMU)
static char *ranks_stats_text;
#endif
static long n_pending;
static void remove_temporaries(void);
static void hold_signals(int hold);
/* The ranks (program_ranks.c in an MPI program; at the end for one core group). */
static int first_rank(void);
static void end_ranks(void);
static void report_error(const char *line);

/* `text` with every control character as \xNN, into `to` (room for 4 bytes
 * per byte of text, and the NUL): a message quotes paths and .npy headers,
 * which may hold newlines, and must stay the one line it claims to be. Only
 * byte operations: the signal handler uses it too. */
static size_t escape_into(char *to, const char *text)
{
    static const char hex[] = "0123456789abcdefx";  /* the digits, then the escape's letter */
    size_t n = 0;
    for (const unsigned char *c = (const unsigned char *)text; *c; c++) {
        if (*c < 0x20 || *c == 0x7f) {
            to[n++] = '\\';
            to[n++] = hex[16];
            to[n++] = hex[*c >> 4];
            to[n++] = hex[*c & 15];
        } else {
            to[n++] = (char)*c;
        }
    }
    to[n] = '\0';
    return n;
}

/* Write all of `text` to stderr in one write() where it can: the lines of
 * several ranks do not interleave mid-line (three stdio calls did). */
static void put_text(const char *text, size_t n)
{
    while (n > 0) {
        ssize_t done = write(2, text, n);
        if (done < 0 && errno == EINTR)
            continue;
        if (done <= 0)
            return;
        text += done;
        n -= (size_t)done;
    }
}

/* "PROGRAM: error: MESSAGE\n", escaped (NULL when out of memory). */
static char *error_line(const char *format, va_list args)
{
    va_list again;
    va_copy(again, args);
    int n = vsnprintf(NULL, 0, format, again);
    va_end(again);
    char *message = n < 0 ? NULL : malloc((size_t)n + 1);
    char *line = message == NULL ? NULL
                 : malloc(4 * (strlen(program) + (size_t)n) + sizeof ": error: \n");
    if (line != NULL) {
        vsnprintf(message, (size_t)n + 1, format, args);
        size_t k = escape_into(line, program);
        strcpy(line + k, ": error: ");
        k += escape_into(line + k + 9, message) + 9;
        strcpy(line + k, "\n");
    }
    free(message);
    return line;
}

static void fail(const char *format, ...) __attribute__((format(printf, 1, 2), noreturn));
static void fail(const char *format, ...)
{
    hold_signals(1);        /* a signal now would clean up a second time */
    va_list args;
    va_start(args, format);
    char *line = error_line(format, args);
    va_end(args);
    remove_temporaries();
    if (line == NULL) {
        static char short_of_memory[300];
        snprintf(short_of_memory, sizeof short_of_memory, "%.200s: error: out of memory\n",
                 program);
        line = short_of_memory;
    }
    report_error(line);
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

/* The header being checked: a global, so that a failure (which exits with
 * it allocated) leaves no leak for LeakSanitizer to report. */
static char *npy_header;

/* Read an open .npy file's header: check that it holds the port's dtype in
 * C order, put its shape in dims[0..*rank) (at most 64 dimensions) and its
 * text in *shape_text (from '(' on, for messages); return the offset of its
 * data. The header is the file's: every read stays inside its text, whatever
 * it holds (a key at its very end, a value without quotes, a shape without
 * its ')'). */
static long npy_read_header(FILE *f, const char *path, const struct port *p, const char *what,
                            long dims[64], int *rank_out, const char **shape_text)
{
    unsigned char magic[8], n[4] = {0};
    if (fread(magic, 1, 8, f) != 8 || memcmp(magic, "\x93NUMPY", 6) != 0)
        fail("%s '%s' is not a .npy file (no \\x93NUMPY header)", what, path);
    if (magic[6] < 1 || magic[6] > 3 || magic[7] != 0)         /* as numpy */
        fail("%s '%s': .npy format version %d.%d is not supported", what, path, magic[6],
             magic[7]);
    size_t wide = magic[6] > 1 ? 4 : 2;     /* 2.0, 3.0: a 4-byte header length */
    if (fread(n, 1, wide, f) != wide)
        fail("%s '%s': truncated .npy header", what, path);
    unsigned long length = n[0] | (unsigned long)n[1] << 8 | (unsigned long)n[2] << 16
                           | (unsigned long)n[3] << 24;
    long start = 8 + (long)wide;
    if (length > 65536)
        fail("%s '%s': .npy header of %lu bytes is too long", what, path, length);
    char *header = npy_header = malloc(length + 1);
    if (header == NULL)
        fail("out of memory");
    if (fread(header, 1, length, f) != length)
        fail("%s '%s': truncated .npy header", what, path);
    header[length] = '\0';
    if (memchr(header, '\0', length) != NULL)     /* numpy refuses it too */
        fail("%s '%s': malformed .npy header (a NUL byte)", what, path);
    const char *descr = npy_field(header, "descr");
    const char *order = npy_field(header, "fortran_order");
    const char *shape = npy_field(header, "shape");
    /* The dtype's quote is checked first: the comparisons below read from
     * the character after it (after a key at the header's end, the NUL). */
    if (descr == NULL || order == NULL || shape == NULL || *shape != '('
        || (*descr != '\'' && *descr != '"'))
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
    int rank = 0;
    for (const char *s = shape + 1; *s != ')';) {
        char *end;
        long d = strtol(s, &end, 10);
        if (end == s || d < 0 || rank == 64)
            fail("%s '%s': malformed .npy shape", what, path);
        dims[rank++] = d;
        s = end;
        while (*s == ' ' || *s == ',' || *s == 'L')
            s++;
    }
    *rank_out = rank;
    *shape_text = shape;
    return start + (long)length;
}

/* Whether dims[0..rank) and shape[0..n) are one shape, dimensions of size 1
 * aside: (3, 224, 224) fills (1, 3, 224, 224). */
static int same_shape(const long *dims, int rank, const long *shape, int n)
{
    int i = 0, j = 0;
    for (;;) {
        while (i < rank && dims[i] == 1)
            i++;
        while (j < n && shape[j] == 1)
            j++;
        if (i == rank || j == n)
            return i == rank && j == n;
        if (dims[i++] != shape[j++])
            return 0;
    }
}

/* The header's shape text for a message: up to its ')' (at most 200 bytes). */
static int shape_text_length(const char *shape)
{
    const char *close = strchr(shape, ')');
    return close != NULL && close - shape < 200 ? (int)(close - shape + 1) : 0;
}

/* The header read, its text freed. */
static void npy_done(void)
{
    free(npy_header);
    npy_header = NULL;
}

/* Check that an open .npy file holds the port's dtype in C order with the
 * port's shape (dimensions of size 1 aside); return the offset of its data. */
static long npy_data_offset(FILE *f, const char *path, const struct port *p, const char *what)
{
    long dims[64];
    int rank;
    const char *shape;
    long start = npy_read_header(f, path, p, what, dims, &rank, &shape);
    if (!same_shape(dims, rank, p->shape, p->rank))
        fail("%s '%s' has shape %.*s; expected the shape of %s", what, path,
             shape_text_length(shape), shape, p->type);
    npy_done();
    return start;
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

/* "input 2 (NAME : TYPE)", for messages about input i: as long as the type
 * is (a 36-dimension type is some 170 characters), freed by the caller. */
static char *input_what(long i, const struct port *p)
{
    int n = snprintf(NULL, 0, "input %ld (%s : %s)", i + 1, p->name, p->type);
    char *what = n < 0 ? NULL : malloc((size_t)n + 1);
    if (what == NULL)
        fail("out of memory");
    snprintf(what, (size_t)n + 1, "input %ld (%s : %s)", i + 1, p->name, p->type);
    return what;
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
 * followed (the file it points to is replaced, the link stays; a dangling
 * one makes the file it points to, as swir/files.py does); a device or a
 * FIFO (/dev/null, a named pipe) is written straight into, and a path naming
 * one of the program's descriptors (/dev/stdout, /dev/fd/N, or a symlink to
 * one) into that descriptor. A replaced file keeps its permission bits; a new
 * one gets 0666 & ~umask. */

struct output {
    const char *path;       /* as given */
    char *target;           /* symlinks followed, absolute (a file's) */
    char *tmp;              /* the temporary file while it is written */
    char *old;              /* a second name of the file replaced, until all are */
    int placed;             /* renamed into place */
    int stream;             /* a device, FIFO or descriptor */
    int exists;             /* a regular file already: dev and ino are its */
    dev_t dev;
    ino_t ino;
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

/* Where symlink `p` leads (its text, after p's folder when relative), newly
 * allocated; NULL if p is not a symlink. */
static char *link_step(const char *p)
{
    char link[4096];
    ssize_t n = readlink(p, link, sizeof link - 1);
    if (n < 0)
        return NULL;
    link[n] = '\0';
    const char *slash = strrchr(p, '/');
    size_t keep = link[0] == '/' || slash == NULL ? 0 : (size_t)(slash - p) + 1;
    char *next = malloc(keep + (size_t)n + 1);
    if (next == NULL)
        fail("out of memory");
    memcpy(next, p, keep);
    memcpy(next + keep, link, (size_t)n + 1);
    return next;
}

/* The descriptor a path names, itself or through symlinks (a link to
 * /dev/stdout leads to /proc/self/fd/1), else -1: written into that
 * descriptor, whatever file it is (replacing a file a shell redirected stdout
 * to would leave the shell's descriptor on the old file). */
static int open_descriptor(const char *path)
{
    char *p = copy_text(path);
    int fd = -1;
    for (int hop = 0; hop < 40 && p != NULL && (fd = descriptor_number(p)) < 0; hop++) {
        char *next = link_step(p);
        free(p);
        p = next;
    }
    free(p);
    return fd;
}

/* The path a chain of symlinks ends at (the file a dangling link would
 * make), or a copy of path itself; at most 40 hops, as the kernel's. */
static char *link_end(const char *path)
{
    char *p = copy_text(path);
    for (int hop = 0; hop < 40; hop++) {
        char *next = link_step(p);
        if (next == NULL)
            break;
        free(p);
        p = next;
    }
    return p;
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

/* Output o is the new file `file` (o->path, or where its dangling link
 * points): its folder must exist and be writable; o->target is the file's
 * absolute path, its folder's symlinks resolved. */
static void new_output(struct output *o, const char *file)
{
    mode_t mask = umask(0);
    umask(mask);
    o->mode = 0666 & ~mask;
    char *dir = copy_text(file);
    char *slash = strrchr(dir, '/');
    if (slash == NULL)
        strcpy(dir, ".");
    else
        slash[slash == dir] = '\0';
    char *real = realpath(dir, NULL);
    if (real == NULL || access(real, W_OK | X_OK) != 0)
        fail("cannot write output '%s': %s", o->path, strerror(errno));
    const char *base = strrchr(file, '/') ? strrchr(file, '/') + 1 : file;
    o->target = malloc(strlen(real) + strlen(base) + 2);
    if (o->target == NULL)
        fail("out of memory");
    sprintf(o->target, "%s/%s", real, base);
    free(real);
    free(dir);
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
        o->exists = !o->stream;
        o->dev = st.st_dev;
        o->ino = st.st_ino;
    } else if (errno == ENOENT) {
        char *file = link_end(path);    /* a dangling link: the file it makes */
        new_output(o, file);
        free(file);
    } else {
        fail("cannot write output '%s': %s", path, strerror(errno));
    }
}

/* Two outputs naming the same file would keep only the last: the same path
 * once links are followed (dangling ones too), or two links to one file. */
static void check_distinct(const struct output *outs, long n)
{
    for (long i = 0; i < n; i++)
        for (long j = i + 1; j < n; j++) {
            const struct output *one = &outs[i], *other = &outs[j];
            if (one->stream || other->stream)
                continue;
            if (strcmp(one->target, other->target) == 0
                || (one->exists && other->exists && one->dev == other->dev
                    && one->ino == other->ino))
                fail("'%s' and '%s' are the same file; give each output its own", one->path,
                     other->path);
        }
}

/* Undo what write_outputs did so far. Only unlink and rename: the signal
 * handler calls it too. */
static void remove_temporaries(void)
{
    for (long i = 0; i < n_pending; i++) {
        struct output *o = &pending[i];
        if (o->old != NULL) {           /* put back what a rename replaced */
            rename(o->old, o->target);
            unlink(o->old);     /* left by a rename between two links to one file */
        } else if (o->placed) {         /* and take away what was new */
            unlink(o->target);
        }
        if (o->tmp != NULL)
            unlink(o->tmp);
    }
}

/* The .npy preamble and header of port p: the dict, padded with spaces and
 * a newline to a multiple of 64 bytes (format 1.0; 2.0, with a 4-byte
 * length, past 65535 bytes: a type of thousands of dimensions). */
static int write_npy_header(FILE *f, const struct port *p)
{
    size_t room = 64 + strlen(p->descr) + (size_t)p->rank * 24;    /* 20 digits, ", " */
    char *text = malloc(room);
    if (text == NULL)
        return -1;
    size_t n = (size_t)snprintf(text, room, "{'descr': '%s', 'fortran_order': False, 'shape': (",
                                p->descr);
    for (int i = 0; i < p->rank; i++)
        n += (size_t)snprintf(text + n, room - n, "%ld%s", p->shape[i],
                              p->rank == 1 ? "," : i + 1 < p->rank ? ", " : "");
    n += (size_t)snprintf(text + n, room - n, "), }");
    int version2 = 10 + n + 1 > 65535;
    size_t head = version2 ? 12 : 10;
    size_t total = (head + n + 1 + 63) / 64 * 64;
    unsigned char preamble[12] = {0x93, 'N', 'U', 'M', 'P', 'Y', version2 ? 2 : 1, 0};
    for (size_t k = 0; k < head - 8; k++)
        preamble[8 + k] = (unsigned char)(((total - head) >> (8 * k)) & 0xff);
    int written = fwrite(preamble, 1, head, f) == head && fwrite(text, 1, n, f) == n;
    free(text);
    for (size_t i = head + n; written && i < total - 1; i++)
        written = fputc(' ', f) != EOF;
    return written && fputc('\n', f) != EOF ? 0 : -1;
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
    unlink(o->old);
    if (link(o->target, o->old) != 0 && rename(o->target, o->old) != 0) {
        free(o->old);
        o->old = NULL;
    }
}

/* stdout's reader went away (a pipe into `head`): the quiet exit 141 of a C
 * tool killed by SIGPIPE, which the program ignores to see EPIPE instead. */
static void quit_on_closed_pipe(void) __attribute__((noreturn));
static void quit_on_closed_pipe(void)
{
    hold_signals(1);
    remove_temporaries();
    _exit(141);
}

/* Write every output: files to temporaries beside them, devices, FIFOs and
 * descriptors straight, then rename the temporaries into place. What the
 * signal handler reads to clean up (the pending outputs' names, what is in
 * place) changes with the signals held; they are let in while bytes are
 * written, where a FIFO without a reader may block for ever. */
static void write_outputs(struct output *outs, long n, int runs)
{
    pending = outs;
    n_pending = n;
    for (long i = 0; i < n; i++) {
        struct output *o = &outs[i];
        if (o->stream)
            continue;
        hold_signals(1);
        int fd = new_beside(o, "tmp", &o->tmp);
        hold_signals(0);
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
        if (f == NULL || write_content(f, o, runs) != 0 || ferror(f) || fclose(f) != 0) {
            if (errno == EPIPE && own == 1)
                quit_on_closed_pipe();
            fail("cannot write output '%s': %s", o->path, strerror(errno));
        }
    }
    hold_signals(1);
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
            unlink(outs[i].old);
        free(outs[i].old);
        free(outs[i].target);
    }
    hold_signals(0);
}

/* ---- Signals -------------------------------------------------------------
 * SIGINT, SIGTERM or SIGHUP during the run: the temporaries are removed and
 * what a rename replaced put back (remove_temporaries: unlink and rename,
 * async-signal-safe), one line `PROGRAM: interrupted` (`terminated`, `hung
 * up`) goes to stderr, and the program exits 128 + the signal's number, as
 * swir's tools do. The handler runs on the main thread: the CPE threads (and
 * MPI's) are started with the signals held, so they inherit them blocked.
 * A signal ignored when the program started (nohup, a background job of a
 * script) stays ignored. SIGPIPE is ignored: a FIFO whose reader went away
 * is a failed write like any other, stdout's the quiet exit 141. */

static sigset_t caught;         /* the signals handled */

/* Hold (or let in) the handled signals on this thread: while the outputs'
 * bookkeeping changes, and while threads are started. */
static void hold_signals(int hold)
{
    sigprocmask(hold ? SIG_BLOCK : SIG_UNBLOCK, &caught, NULL);
}

static void on_signal(int signo)
{
    const char *what = signo == SIGINT ? ": interrupted\n"
                       : signo == SIGHUP ? ": hung up\n" : ": terminated\n";
    char line[1100];
    remove_temporaries();
    if (first_rank() && strlen(program) < 256) {
        size_t n = escape_into(line, program);
        strcpy(line + n, what);
        put_text(line, strlen(line));
    }
    _exit(128 + signo);
}

/* Install the handlers; the signals are left held (let in by main once the
 * threads MPI starts have inherited them blocked). */
static void catch_signals(void)
{
    static const int signals[] = {SIGINT, SIGTERM, SIGHUP};
    struct sigaction action, before;
    memset(&action, 0, sizeof action);
    sigemptyset(&caught);
    for (int i = 0; i < 3; i++)
        sigaddset(&caught, signals[i]);
    action.sa_handler = on_signal;
    action.sa_mask = caught;        /* one handler at a time */
    hold_signals(1);
    for (int i = 0; i < 3; i++)
        if (sigaction(signals[i], NULL, &before) == 0 && before.sa_handler != SIG_IGN)
            sigaction(signals[i], &action, NULL);
    action.sa_handler = SIG_IGN;
    sigaction(SIGPIPE, &action, NULL);
}

/* ---- Results on stdout (no --output given): as swir-run prints them -------
 * `result 1 (NAME : TYPE):` and the array as numpy prints it: nested
 * brackets, lines of at most 75 columns, elements padded to one width, and
 * an array of over 1000 elements summarized by the first and last 3 of each
 * axis around "...". */

struct printer {
    const struct port *port;
    const unsigned char *data;
    int summarize;
    int width;                  /* of the widest element; 0 while measuring */
    int column;
    FILE *to;
};

/* An f16's value (the bits of IEEE binary16). */
static double half_value(unsigned bits)
{
    int exponent = (int)(bits >> 10 & 31);
    double fraction = (double)(bits & 1023);
    double value = exponent == 0 ? ldexp(fraction, -24)
                   : exponent == 31 ? (fraction != 0 ? NAN : INFINITY)
                   : ldexp(fraction + 1024, exponent - 25);
    return bits & 0x8000 ? -value : value;
}

/* Integer element `at` of `size` bytes, as text. */
static int integer_text(const unsigned char *at, size_t size, char *text, size_t room)
{
    int16_t two_bytes;
    int32_t four_bytes;
    int64_t value = *(const signed char *)at;
    if (size == 2) {
        memcpy(&two_bytes, at, 2);
        value = two_bytes;
    } else if (size == 4) {
        memcpy(&four_bytes, at, 4);
        value = four_bytes;
    } else if (size == 8) {
        memcpy(&value, at, 8);
    }
    return snprintf(text, room, "%lld", (long long)value);
}

/* Element i as numpy spells it: True/False, integers, floats in the fewest
 * digits that tell them apart, with a '.' (1. for 1.0), nan, inf. (swir's
 * element types are bool, signed integers and floats.) */
static int element_text(const struct printer *printing, size_t i, char *text, size_t room)
{
    char kind = printing->port->descr[1];
    size_t size = (size_t)(printing->port->descr[2] - '0');
    const unsigned char *at = printing->data + i * size;
    if (kind == 'i')
        return integer_text(at, size, text, room);
    if (kind != 'f')
        return snprintf(text, room, "%s", *at ? "True" : "False");
    double value;
    float single = 0;
    uint16_t half_bits;
    if (size == 2) {
        memcpy(&half_bits, at, 2);
        value = half_value(half_bits);
    } else if (size == 4) {
        memcpy(&single, at, 4);
        value = single;
    } else {
        memcpy(&value, at, 8);
    }
    if (!isfinite(value))
        return snprintf(text, room, "%s", value != value ? "nan" : value < 0 ? "-inf" : "inf");
    /* The fewest digits that read back as the same value: for an f16, a
     * value nearer to it than half the gap to the next f16 below it. */
    int binary_exponent, n = 0;
    double fraction = frexp(value, &binary_exponent);
    double half_gap = ldexp(fabs(fraction) == 0.5 ? 0.25 : 0.5,
                            binary_exponent - 1 < -14 ? -24 : binary_exponent - 11);
    for (int digits = 1; digits <= 17; digits++) {
        n = snprintf(text, room, "%.*g", digits, value);
        double back = strtod(text, NULL);
        if (size == 2 ? fabs(back - value) < half_gap
                      : size == 4 ? (float)back == single : back == value)
            break;
    }
    if (strpbrk(text, ".eE") == NULL)
        n += snprintf(text + n, room - (size_t)n, ".");
    return n;
}

static void print_text(struct printer *printing, const char *text)
{
    if (printing->width)
        printing->column += fprintf(printing->to, "%s", text);
}

/* Between two items of axis `axis`: a space (or, past 75 columns, a new
 * line) inside a row; new lines and an indent between rows and blocks. */
static void print_gap(struct printer *printing, int axis)
{
    int rank = printing->port->rank;
    if (!printing->width)
        return;
    if (axis == rank - 1 && printing->column + 1 + printing->width + rank < 76) {
        printing->column += fprintf(printing->to, " ");
        return;
    }
    for (int k = 0; k < (axis == rank - 1 ? 1 : rank - axis - 1); k++)
        fputc('\n', printing->to);
    printing->column = fprintf(printing->to, "%*s", axis + 1, "");
}

/* The items of axis `axis` from element `first` (measuring the widest
 * element when printing->width is 0). */
static void print_axis(struct printer *printing, int axis, size_t first)
{
    const struct port *p = printing->port;
    size_t stride = 1;
    for (int k = axis + 1; k < p->rank; k++)
        stride *= (size_t)p->shape[k];
    long n = p->shape[axis];
    print_text(printing, "[");
    for (long k = 0; k < n; k++) {
        if (k > 0)
            print_gap(printing, axis);
        if (printing->summarize && n > 6 && k == 3) {
            print_text(printing, "...");
            print_gap(printing, axis);
            k = n - 3;
        }
        if (axis + 1 < p->rank) {
            print_axis(printing, axis + 1, first + (size_t)k * stride);
            continue;
        }
        char text[64];
        int chars = element_text(printing, first + (size_t)k, text, sizeof text);
        if (!printing->width && chars > printing->column)
            printing->column = chars;           /* measuring: the widest so far */
        else if (printing->width)
            printing->column += fprintf(printing->to, "%*s", printing->width, text);
    }
    print_text(printing, "]");
}

static void print_result(FILE *to, long i, const struct port *p, const void *data)
{
    struct printer printing = {p, data, 0, 0, 0, to};
    size_t size = (size_t)(p->descr[2] - '0');
    fprintf(to, "result %ld (%s : %s):\n", i + 1, p->name, p->type);
    if (p->rank == 0) {
        char text[64];
        element_text(&printing, 0, text, sizeof text);
        fprintf(to, "%s\n", text);
        return;
    }
    if (p->bytes == 0) {
        fprintf(to, "[]\n");
        return;
    }
    printing.summarize = p->bytes / size > 1000;
    print_axis(&printing, 0, 0);        /* measure */
    printing.width = printing.column;
    printing.column = 0;
    print_axis(&printing, 0, 0);
    fputc('\n', to);
}

/* Every result on stdout; a closed stdout is no error (nothing is lost that
 * was asked for), a full one is. */
static void print_results(const struct port *ports, long n, void **results)
{
    for (long i = 0; i < n; i++)
        print_result(stdout, i, &ports[i], results[i]);
    if (fflush(stdout) != 0 || ferror(stdout)) {
        if (errno == EPIPE)
            quit_on_closed_pipe();
        if (errno != EBADF)
            fail("cannot write standard output: %s", strerror(errno));
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

/* A count option's value (--repeat, --steps): 1 to 1000000000. */
static long count_option(const char *flag, const char *v)
{
    char *end;
    long n = strtol(v, &end, 10);
    if (*v == '\0' || *end != '\0' || n < 1 || n > 1000000000)
        fail("%s needs a count from 1 to 1000000000, got '%s'", flag, v);
    return n;
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
        else if (strcmp(a, "--repeat") == 0)
            o->repeat = count_option(a, v);
        else
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
static void report_error(const char *line) { put_text(line, strlen(line)); }
static void all_checked(void) {}
static void start_ranks(int *argc, char ***argv) { (void)argc; (void)argv; }
static void read_share(FILE *f, void *mine, const struct port *p, const char *path,
                       const char *what, int scatter)
{ (void)scatter; read_input(f, mine, p->bytes, path, what); }
static void collect_output(const void *mine, void *whole, size_t bytes)
{ (void)mine; (void)whole; (void)bytes; }
static void ranks_stats(int runs) { (void)runs; }
static void end_ranks(void) {}
#endif
