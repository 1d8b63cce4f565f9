/* ---- main: the training program (swir-cg --train) ------------------------
 * Runs the training step swir_run --steps times: step s reads batch
 * (s mod batches) of each data file, the carried state stays in memory from
 * one step to the next (each step's new values are the next step's
 * parameters), rank 0 logs each step's loss; --save writes the module's
 * weights file with the trained values in place (docs/codegen.md, "Training
 * programs"). Every check is made before the first step. */

/* The terminal's width for the progress bar (TIOCGWINSZ). */
#include <sys/ioctl.h>

#ifdef SWIR_RANKS
#define TRAIN_RANK rank
#else
#define TRAIN_RANK 0
#endif

struct train_options {
    const char **inputs;
    long n_inputs, steps;
    const char *save, *loss_log, *stats, *weights, *carried;
    char *weights_default, *carried_default;
};

static void train_usage(FILE *to)
{
    fprintf(to, "usage: %s --input FILE ... [--steps N] [--save FILE] [--loss-log FILE] "
                "[--stats FILE.json] [--weights FILE] [--carried FILE]\n"
                "Trains: --steps training steps (default 1); step s reads batch s mod B of "
                "each\n--input (one per data parameter, in order; a FILE named *.npy is a "
                "NumPy array,\nany other raw little-endian; each holds B whole batches one "
                "after another).\n--save writes the trained parameters as the model's "
                "weights file, --loss-log\none line per step: the step (from 1) and its "
                "loss; --stats (make emu)\nthe emulation's counters over all the steps.\n", program);
}

/* `name` in the program's own folder (argv[0]'s), newly allocated. */
static char *beside_program(const char *argv0, const char *name)
{
    const char *slash = strrchr(argv0, '/');
    size_t dir = slash ? (size_t)(slash - argv0) + 1 : 0;
    char *path = malloc(dir + strlen(name) + 1);
    if (path == NULL)
        fail("out of memory");
    memcpy(path, argv0, dir);
    strcpy(path + dir, name);
    return path;
}

static void parse_train_options(int argc, char **argv, struct train_options *o)
{
    o->inputs = calloc((size_t)argc, sizeof *o->inputs);
    if (o->inputs == NULL)
        fail("out of memory");
    o->steps = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            if (first_rank())
                train_usage(stdout);
            end_ranks();
            exit(0);
        }
        if (i + 1 >= argc)
            fail("%s: unknown option or missing value (see --help)", a);
        const char *v = argv[++i];
        if (strcmp(a, "--input") == 0)
            o->inputs[o->n_inputs++] = v;
        else if (strcmp(a, "--save") == 0)
            o->save = v;
        else if (strcmp(a, "--loss-log") == 0)
            o->loss_log = v;
        else if (strcmp(a, "--stats") == 0)
            o->stats = v;
        else if (strcmp(a, "--weights") == 0)
            o->weights = v;
        else if (strcmp(a, "--carried") == 0)
            o->carried = v;
        else if (strcmp(a, "--steps") == 0)
            o->steps = count_option(a, v);
        else
            fail("unknown option '%s' (see --help)", a);
    }
#ifndef SWIR_EMU
    if (o->stats != NULL)
        fail("--stats needs the emulation build (make emu)");
#endif
    if (o->weights == NULL)     /* default: weights.bin and carried.bin beside the program */
        o->weights = o->weights_default = beside_program(argv[0], "weights.bin");
    if (o->carried == NULL)
        o->carried = o->carried_default = beside_program(argv[0], "carried.bin");
}

/* A data parameter's file: whole batches (the port's bytes each) from
 * `start`, `count` of them. */
struct batches {
    FILE *file;
    long start, count;
};

/* Open a data file and count its batches: a .npy file's leading dimension
 * is a multiple of the port's (the rest its shape, dimensions of size 1
 * aside), a raw file's size a multiple of the port's bytes; none is an
 * error. Left open for the steps to read from. */
static struct batches open_batches(const char *path, const struct port *p, const char *what)
{
    struct batches b = {fopen(path, "rb"), 0, 0};
    if (b.file == NULL)
        fail("cannot open %s '%s': %s", what, path, strerror(errno));
    long batch = p->rank > 0 ? p->shape[0] : 1, rows = -1;
    if (has_suffix(path, ".npy")) {
        long dims[64];
        int n;
        const char *shape;
        b.start = npy_read_header(b.file, path, p, what, dims, &n, &shape);
        if (n < 1 || dims[0] % batch != 0
            || !same_shape(dims + 1, n - 1, p->rank > 0 ? p->shape + 1 : NULL,
                           p->rank > 0 ? p->rank - 1 : 0))
            fail("%s '%s' has shape %.*s; expected whole batches of %s, one after another "
                 "(a leading dimension that is a multiple of %ld)", what, path,
                 shape_text_length(shape), shape, p->type, batch);
        rows = dims[0];
        npy_done();
    }
    long size = -1;
    if (fseek(b.file, 0, SEEK_END) == 0)
        size = ftell(b.file);
    if (size < 0 || size == LONG_MAX)
        fail("cannot read %s '%s' (not a regular file?)", what, path);
    long data = size - b.start;
    if (rows >= 0 && (size_t)data != (size_t)(rows / batch) * p->bytes)
        fail("%s '%s' has %ld bytes of data; its shape needs %ld", what, path, data,
             (long)((size_t)(rows / batch) * p->bytes));
    if (data % (long)p->bytes != 0)
        fail("%s '%s' has %ld bytes; expected a multiple of %ld (whole batches of %s)", what,
             path, data, (long)p->bytes, p->type);
    b.count = data / (long)p->bytes;
    if (b.count == 0)
        fail("%s '%s' holds no batch (a batch of %s is %ld bytes)", what, path, p->type,
             (long)p->bytes);
    return b;
}

/* This rank's share of batch `index` (its block of it with a data split). */
static void read_batch(const struct batches *b, void *to, const struct port *p, long index,
                       const char *path, const char *what)
{
    size_t share = p->bytes / SHARE;
    long at = b->start + index * (long)p->bytes + (long)TRAIN_RANK * (long)share;
    if (fseek(b->file, at, SEEK_SET) != 0 || (share && fread(to, 1, share, b->file) != share))
        fail("cannot read batch %ld of %s '%s'", index + 1, what, path);
}

/* The carried state's values, each a hash (FNV-1a, 62 bits): what the
 * ranks compare after every step. */
static long long state_hash(const void *data, size_t bytes)
{
    unsigned long long hash = 14695981039346656037ULL;
    for (size_t i = 0; i < bytes; i++)
        hash = (hash ^ ((const unsigned char *)data)[i]) * 1099511628211ULL;
    return (long long)(hash >> 2);
}

/* Every rank holds the same carried values after step `step` (the step's
 * allreduce averaged the gradients alike on every rank): each value's hash,
 * the greatest and the least over the ranks by one MPI_Allreduce, must agree. */
static void check_replicas(void **state, long step)
{
#ifdef SWIR_RANKS
    long long mine[2 * N_CARRIED], all[2 * N_CARRIED];
    for (long k = 0; k < N_CARRIED; k++) {
        mine[2 * k] = state_hash(state[k], carried_ports[k].bytes);
        mine[2 * k + 1] = -mine[2 * k];
    }
    check_mpi(MPI_Allreduce(mine, all, 2 * N_CARRIED, MPI_LONG_LONG, MPI_MAX, MPI_COMM_WORLD),
              "MPI_Allreduce of the carried values' hashes");
    for (long k = 0; k < N_CARRIED; k++)
        if (all[2 * k] != -all[2 * k + 1]) {
            /* Every rank knows: rank 0 reports it once, its MPI_Abort ends the others. */
            if (!ROOT)
                MPI_Barrier(MPI_COMM_WORLD);
            fail("after step %ld the ranks hold different values of %s (carried state %ld): "
                 "the step must leave every rank the same parameters", step, carried_ports[k].name,
                 k + 1);
        }
#else
    (void)state;
    (void)step;
    (void)state_hash;
#endif
}

/* The bar on stderr (a terminal only, rank 0): steps done of all, the loss. */
static void draw_progress(long done, long steps, double loss)
{
    struct winsize size;
    long columns = 80;
    const char *env = getenv("COLUMNS");
    if (ioctl(2, TIOCGWINSZ, &size) == 0 && size.ws_col > 0)
        columns = size.ws_col;
    else if (env != NULL && atol(env) > 0)
        columns = atol(env);
    char text[160], bar[300];
    int n = snprintf(text, sizeof text, " %ld/%ld steps, loss %.6g", done, steps, loss);
    long width = columns - 1 - (long)sizeof "training |" - n;
    width = width < 0 ? 0 : width > 250 ? 250 : width;
    long filled = width * done / steps;
    for (long i = 0; i < width; i++)
        bar[i] = i < filled ? '#' : ' ';
    bar[width] = '\0';
    fprintf(stderr, "\rtraining |%s|%s%s", bar, text, done == steps ? "\n" : "");
    fflush(stderr);
}

/* The loss log's text: "step loss" per line, the loss in the digits that
 * read back to the same f32 or f64. */
static char *loss_log_text(const double *losses, long steps, size_t *length)
{
    size_t room = (size_t)steps * 40 + 1, n = 0;
    char *text = malloc(room);
    if (text == NULL)
        fail("out of memory writing the loss log (%ld steps)", steps);
    for (long s = 0; s < steps; s++)
        n += (size_t)snprintf(text + n, room - n, "%ld %.*g\n", s + 1,
                              sizeof(swir_loss) == 4 ? 9 : 17, losses[s]);
    *length = n;
    return text;
}

/* --save's bytes: the module's weights file (carried.bin's first bytes) with
 * each file-initialised carried value's trained bytes at its offset. */
static unsigned char *trained_weights(const unsigned char *carried, void **state)
{
    unsigned char *image = alloc_block(SWIR_SAVED_BYTES, "the trained weights");
    memcpy(image, carried, SWIR_SAVED_BYTES);
    for (long k = 0; k < N_CARRIED; k++)
        if (carried_saved[k])
            memcpy(image + carried_at[k], state[k], carried_ports[k].bytes);
    return image;
}

/* carried.bin read whole; each state's first value from it (or filled in). */
static unsigned char *load_carried(FILE *file, const char *path, void **state)
{
    unsigned char *carried = alloc_block(SWIR_CARRIED_BYTES, "carried.bin");
    read_input(file, carried, SWIR_CARRIED_BYTES, path, "carried state file");
    for (long k = 0; k < N_CARRIED; k++) {
        state[k] = alloc_block(carried_ports[k].bytes, carried_ports[k].name);
        if (carried_at[k] >= 0)
            memcpy(state[k], carried + carried_at[k], carried_ports[k].bytes);
    }
    fill_carried(state);
    return carried;
}

static const struct port carried_file_port = {"carried", "bytes", SWIR_CARRIED_BYTES, "|u1",
                                              0, NULL};

/* --save, --loss-log and --stats: checked before the steps (rank 0 writes
 * them); the first two are not .npy files. */
static long check_train_outputs(const struct train_options *opt, struct output *outs,
                                struct port *ports)
{
    const char *paths[2] = {opt->save, opt->loss_log};
    const char *names[2] = {"--save", "--loss-log"};
    long n = 0;
    if (opt->save != NULL && SWIR_SAVED_BYTES == 0)
        fail("--save: no carried value comes from a weights file (the module's carried "
             "globals are all dense<...>): there is nothing to save");
    for (int i = 0; i < 2; i++) {
        if (paths[i] == NULL)
            continue;
        if (has_suffix(paths[i], ".npy"))
            fail("%s '%s': writes %s, not a .npy file (give another name)", names[i],
                 paths[i], i == 0 ? "the model's weights file format" : "text");
        ports[n] = (struct port){i == 0 ? "trained weights" : "loss log", "bytes", 0, "|u1",
                                 0, NULL};
        if (ROOT)
            check_output(&outs[n], paths[i]);
        outs[n].port = &ports[n];
        n++;
    }
    if (ROOT && opt->stats != NULL)
        check_output(&outs[n], opt->stats);
    n += opt->stats != NULL;            /* its port: NULL, the emulation's counters */
    if (ROOT)
        check_distinct(outs, n);
    return n;
}

int main(int argc, char **argv)
{
    struct train_options opt = {0};
    void *in[N_INPUTS + N_CARRIED + 1], *out[N_OUTPUTS + 1];
    struct batches data[N_INPUTS + 1];
    struct output outs[3];
    struct port out_ports[2];
    char *what[N_INPUTS + 1];
    /* The inference program's support that training does not call. */
    (void)parse_options;
    (void)print_results;
    (void)read_share;
    (void)collect_output;
    program = argc > 0 ? argv[0] : "program";
    SWIR_PROGRAM(program);
    catch_signals();                    /* held until MPI's threads have started */
    start_ranks(&argc, &argv);
    hold_signals(0);
    parse_train_options(argc, argv, &opt);
    if (opt.n_inputs != N_INPUTS)
        fail("expected %d --input files (one per data parameter), got %ld", N_INPUTS,
             opt.n_inputs);
    memset(outs, 0, sizeof outs);
    long n_outs = check_train_outputs(&opt, outs, out_ports);
    /* Every rank opens and checks every file itself (an error they all meet
     * is printed once: program_ranks.c's all_checked). */
    long n_batches = N_INPUTS == 0;     /* a step without data: one "batch" of nothing */
    for (long i = 0; i < N_INPUTS; i++) {
        what[i] = input_what(i, &input_ports[i]);
        data[i] = open_batches(opt.inputs[i], &input_ports[i], what[i]);
        if (i > 0 && data[i].count != n_batches)
            fail("%s '%s' holds %ld batches; input 1 holds %ld (the inputs are read "
                 "together, batch by batch)", what[i], opt.inputs[i], data[i].count, n_batches);
        n_batches = data[i].count;
    }
    FILE *weights_file = open_input(opt.weights, &weights_port, "weights file", 0);
    FILE *carried_file = open_input(opt.carried, &carried_file_port, "carried state file", 0);
    all_checked();
    hold_signals(1);                    /* the CPE threads start with them blocked */
    athread_init();
    hold_signals(0);
    load_constants(weights_file, opt.weights);
    unsigned char *carried = load_carried(carried_file, opt.carried, in + N_INPUTS);
    place_buffers();
    for (long i = 0; i < N_INPUTS; i++)
        in[i] = alloc_block(input_ports[i].bytes / SHARE, input_ports[i].name);
    for (long i = 0; i < N_OUTPUTS; i++)
        out[i] = alloc_block(output_ports[i].bytes, output_ports[i].name);
    double *losses = malloc((size_t)opt.steps * sizeof *losses);
    if (losses == NULL)
        fail("out of memory for the losses of %ld steps", opt.steps);
    int bar = ROOT && isatty(2);
    for (long s = 0; s < opt.steps; s++) {
        for (long i = 0; i < N_INPUTS; i++)
            read_batch(&data[i], in[i], &input_ports[i], s % n_batches, opt.inputs[i],
                       what[i]);
        swir_run(in, out);
        losses[s] = (double)*(const swir_loss *)out[0];
        for (long k = 0; k < N_CARRIED; k++) {     /* the new values: the next parameters */
            void *next = out[1 + k];
            out[1 + k] = in[N_INPUTS + k];
            in[N_INPUTS + k] = next;
        }
        check_replicas(in + N_INPUTS, s + 1);
        if (bar)
            draw_progress(s + 1, opt.steps, losses[s]);
    }
    char *log = NULL;
    if (opt.stats != NULL)
        ranks_stats((int)opt.steps);
    for (long i = 0; ROOT && i < n_outs; i++) {     /* rank 0 writes them */
        if (outs[i].port == NULL)
            continue;
        struct port *p = &out_ports[i];
        if (strcmp(p->name, "trained weights") == 0) {
            p->bytes = SWIR_SAVED_BYTES;
            outs[i].data = trained_weights(carried, in + N_INPUTS);
        } else {
            outs[i].data = log = loss_log_text(losses, opt.steps, &p->bytes);
        }
    }
    if (ROOT)
        write_outputs(outs, n_outs, (int)opt.steps);
    athread_halt();
    end_ranks();
    for (long i = 0; i < N_INPUTS; i++) {
        fclose(data[i].file);
        free(what[i]);
    }
    free(log);
    free(losses);
    free_blocks();
    free(opt.inputs);
    free(opt.weights_default);
    free(opt.carried_default);
    return 0;
}
