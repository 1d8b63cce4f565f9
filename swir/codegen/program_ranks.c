/* ---- Ranks: one MPI process per core group -----------------------------
 * Every rank runs the same program on its share (SWIR_RANKS of them, started
 * by mpirun -np SWIR_RANKS; on Sunway, bsub -n SWIR_RANKS -np 4: four per
 * chip, -np 6 on the SW26010-Pro's chip of 6 core groups). Rank 0 checks the inputs and writes the outputs. SWIR_SPLIT_DATA:
 * each rank computes its block of the batch (read from the input file by
 * each rank, or scattered with --scatter; outputs gathered); else each rank
 * computes a slice of every split layer's channels (inputs broadcast; the
 * collectives between layers leave every rank the whole outputs). Only the
 * MPE calls MPI. */

static int rank;

/* A send buffer as MPI-1 and MPI-2 declare it (`void *`; `const void *` only
 * from MPI 3.0): the MPI of public TaihuLight builds is of unknown version, so
 * only MPI-1/2 calls and prototypes are assumed (docs/codegen.md). */
#define SWIR_MPI_SEND(buffer) ((void *)(buffer))

#define ROOT (rank == 0)
static int first_rank(void) { return ROOT; }
#if SWIR_SPLIT_DATA
#define SHARE SWIR_RANKS
#else
#define SHARE 1
#endif

/* What this rank sent, per collective (--stats "mpi"). */
struct mpi_counter {
    const char *name;
    long long calls, bytes_sent;
};
enum { MPI_ALLGATHER_, MPI_REDUCE_SCATTER_, MPI_ALLREDUCE_, MPI_SCATTER_, MPI_GATHER_,
       MPI_BCAST_, N_COLLECTIVES };
static struct mpi_counter collectives[N_COLLECTIVES] = {
    {"allgather", 0, 0}, {"reduce_scatter", 0, 0}, {"allreduce", 0, 0}, {"scatter", 0, 0},
    {"gather", 0, 0}, {"bcast", 0, 0}};

static void count(int which, long long bytes_sent)
{
    collectives[which].calls++;
    collectives[which].bytes_sent += bytes_sent;
}

/* A rank that fails ends every rank: MPI_Abort, so no rank waits forever in
 * a collective for one that has gone. */
static void abort_ranks(void)
{
    int started = 0, ended = 0;
    MPI_Initialized(&started);
    MPI_Finalized(&ended);
    if (started && !ended)
        MPI_Abort(MPI_COMM_WORLD, 1);
}

/* Until every rank has checked its command line and files (all_checked),
 * the ranks compare their failures before reporting: an error every rank
 * met alike (a usage error, a weights file none can read) is printed once,
 * by rank 0, every rank exiting 1; an error of some ranks only is printed
 * by each of them. Nothing before all_checked is collective, so a failing
 * rank's MPI_Allreduce (in fail) meets the others' (in all_checked). */
static int agreeing;

/* A line's hash (FNV-1a), 62 bits: the ranks' lines compare by it. */
static long long line_hash(const char *line)
{
    unsigned long long hash = 14695981039346656037ULL;
    for (const unsigned char *byte = (const unsigned char *)line; *byte; byte++)
        hash = (hash ^ *byte) * 1099511628211ULL;
    return (long long)(hash >> 2);
}

/* Every rank's {failed, did not fail, line hash, -line hash}, by the
 * maximum: whether any rank failed, any did not, and whether the failed
 * ranks' lines were one line. 0 if the ranks could not compare. */
static int compare_failures(const char *line, long long all[4])
{
    long long hash = line != NULL ? line_hash(line) : LLONG_MIN;
    long long mine[4] = {line != NULL, line == NULL, hash, line != NULL ? -hash : LLONG_MIN};
    agreeing = 0;
    return MPI_Allreduce(mine, all, 4, MPI_LONG_LONG, MPI_MAX, MPI_COMM_WORLD) == MPI_SUCCESS;
}

static void report_error(const char *line)
{
    long long all[4];
    if (agreeing && compare_failures(line, all)) {
        int alike = !all[1] && all[2] == -all[3];     /* every rank, the same line */
        if (ROOT || !alike)
            put_text(line, strlen(line));
        MPI_Finalize();         /* every rank knows: none is left waiting */
        return;
    }
    put_text(line, strlen(line));
    abort_ranks();      /* every rank exits: none is left waiting in a collective */
}

/* Every rank has checked its command line and files; if another failed, it
 * said why: exit 1 quietly. */
static void all_checked(void)
{
    long long all[4];
    if (!agreeing)
        return;
    if (!compare_failures(NULL, all))
        fail("rank %d: the ranks could not compare their checks (MPI_Allreduce failed)", rank);
    if (all[0]) {
        MPI_Finalize();
        exit(1);
    }
}

static void check_mpi(int status, const char *what)
{
    if (status != MPI_SUCCESS) {
        char text[MPI_MAX_ERROR_STRING];
        int n = 0;
        MPI_Error_string(status, text, &n);
        fail("rank %d: %s failed: %.*s", rank, what, n, text);
    }
}

/* An MPI count: bytes as an int (MPI's counts are), or an error. */
static int mpi_bytes(size_t bytes, const char *what)
{
    if (bytes > INT_MAX)
        fail("%s of %zu bytes is more than one MPI call moves (%d bytes)", what, bytes,
             INT_MAX);
    return (int)bytes;
}

/* `bytes` of the weights file from `offset` (its size was checked: only a
 * failing read is left to report). */
static void read_at(FILE *f, void *to, size_t bytes, long offset, const char *path)
{
    if (fseek(f, offset, SEEK_SET) != 0 || (bytes && fread(to, 1, bytes, f) != bytes))
        fail("cannot read weights file '%s'", path);
}

static void start_ranks(int *argc, char ***argv)
{
    int size, provided;
    /* The MPE alone calls MPI (the CPE threads of the emulation never do). */
    if (MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
        fail("MPI_Init failed");
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    /* Checked on every rank: each exits by itself, none waits for another. */
    if (size != SWIR_RANKS) {
        if (rank == 0)
            fprintf(stderr, "%s: error: compiled for %d ranks (swir-cg --ranks %d), started on "
                    "%d: run mpirun -np %d\n", program, SWIR_RANKS, SWIR_RANKS, size,
                    SWIR_RANKS);
        MPI_Finalize();
        exit(1);
    }
    agreeing = 1;
}

/* This rank's share of input `p` (its block of the batch, or all of it),
 * into `mine`; `f` is rank 0's file, opened and checked.
 * - Split by channels: rank 0 reads it and broadcasts it (MPI_Bcast).
 * - Split by the batch: every rank opens the file (on a file system the
 *   ranks share) and reads its own block, at rank x block bytes after the
 *   .npy header, as MPI-IO would: at 256 ranks a scatter from rank 0 would
 *   push the whole batch through one node's link (docs/codegen.md, "Many
 *   core groups"). With --scatter (a file only rank 0 sees), rank 0 reads
 *   the whole batch and scatters it (MPI_Scatter). */
static void read_share(FILE *f, void *mine, const struct port *p, const char *path,
                       const char *what, int scatter)
{
#if SWIR_SPLIT_DATA
    int n = mpi_bytes(p->bytes / SWIR_RANKS, "an input's share");
    if (!scatter) {
        /* Rank 0 checked the file first: the others open it after the
         * barrier, so a bad file is reported once (rank 0's fail() ends all). */
        check_mpi(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
        if (!ROOT)
            f = open_input(path, p, what, 1);
        long start = ftell(f);
        if (start < 0 || fseek(f, start + (long)rank * n, SEEK_SET) != 0)
            fail("cannot read %s '%s'", what, path);
        read_input(f, mine, (size_t)n, path, what);
        return;
    }
    void *whole = ROOT ? alloc_block(p->bytes, p->name) : NULL;
    if (ROOT)
        read_input(f, whole, p->bytes, path, what);
    check_mpi(MPI_Scatter(whole, n, MPI_BYTE, mine, n, MPI_BYTE, 0, MPI_COMM_WORLD),
              "MPI_Scatter of an input");
    count(MPI_SCATTER_, ROOT ? (long long)n * (SWIR_RANKS - 1) : 0);
#else
    (void)scatter;
    int n = mpi_bytes(p->bytes, "an input");
    if (ROOT)
        read_input(f, mine, p->bytes, path, what);
    check_mpi(MPI_Bcast(mine, n, MPI_BYTE, 0, MPI_COMM_WORLD), "MPI_Bcast of an input");
    count(MPI_BCAST_, ROOT ? (long long)n * (SWIR_RANKS - 1) : 0);
#endif
}

/* The whole output (`bytes`) on rank 0: the ranks' blocks of the batch
 * gathered; with channel slices, every rank has it already. */
static void collect_output(const void *mine, void *whole, size_t bytes)
{
#if SWIR_SPLIT_DATA
    int n = mpi_bytes(bytes / SWIR_RANKS, "an output's share");
    check_mpi(MPI_Gather(SWIR_MPI_SEND(mine), n, MPI_BYTE, whole, n, MPI_BYTE, 0, MPI_COMM_WORLD),
              "MPI_Gather of an output");
    count(MPI_GATHER_, ROOT ? 0 : n);
#else
    (void)mine;
    (void)whole;
    (void)bytes;
#endif
}

/* swir's mpi_allgather: every rank's slice of a tensor, put together along
 * an axis. `part` is `outer` runs of `run` bytes (outer: the product of the
 * axes before the gathered one); the whole tensor holds, for each run, the
 * ranks' runs in rank order. With outer = 1 (a batch-1 NCHW activation split
 * by channels) MPI_Allgather writes it directly; else it gathers into a
 * staging block (the ranks' parts one after another) and the MPE interleaves. */
static void swir_allgather(const void *part, void *whole, size_t run, long outer)
{
    int n = mpi_bytes(run * (size_t)outer, "an allgather's slice");
    unsigned char *staging = outer == 1 ? whole : malloc((size_t)n * SWIR_RANKS);
    if (staging == NULL)
        fail("out of memory gathering a split tensor (%zu bytes)", (size_t)n * SWIR_RANKS);
    check_mpi(MPI_Allgather(SWIR_MPI_SEND(part), n, MPI_BYTE, staging, n, MPI_BYTE, MPI_COMM_WORLD),
              "MPI_Allgather");
    count(MPI_ALLGATHER_, (long long)n * (SWIR_RANKS - 1));
    if (outer == 1)
        return;
    for (long r = 0; r < SWIR_RANKS; r++)
        for (long o = 0; o < outer; o++)
            memcpy((unsigned char *)whole + ((size_t)o * SWIR_RANKS + (size_t)r) * run,
                   staging + ((size_t)r * (size_t)outer + (size_t)o) * run, run);
    free(staging);
}

/* swir's mpi_reduce_scatter: this rank's `elements` (of `type`,
 * MPI_FLOAT or MPI_DOUBLE, `size` bytes each) of the sum of every rank's
 * partial sum: the ranks' slices are contiguous runs of the whole. The MPI-1
 * MPI_Reduce_scatter with equal counts, not MPI 2.2's _block: the MPI of
 * public TaihuLight builds is of unknown version (docs/codegen.md). */
static void swir_reduce_scatter(const void *partial, void *part, long elements,
                                MPI_Datatype type, size_t size)
{
    int n = mpi_bytes((size_t)elements * size, "a reduce-scatter's slice") / (int)size;
    int counts[SWIR_RANKS];
    for (int r = 0; r < SWIR_RANKS; r++)
        counts[r] = n;
    check_mpi(MPI_Reduce_scatter(SWIR_MPI_SEND(partial), part, counts, type, MPI_SUM, MPI_COMM_WORLD),
              "MPI_Reduce_scatter");
    count(MPI_REDUCE_SCATTER_, (long long)n * (long long)size * (SWIR_RANKS - 1));
}

/* swir's mpi_allreduce: the sum of every rank's `elements`, on every rank. */
static void swir_allreduce(const void *partial, void *whole, long elements, MPI_Datatype type,
                           size_t size)
{
    int n = mpi_bytes((size_t)elements * size, "an allreduce") / (int)size;
    check_mpi(MPI_Allreduce(SWIR_MPI_SEND(partial), whole, n, type, MPI_SUM, MPI_COMM_WORLD),
              "MPI_Allreduce");
    count(MPI_ALLREDUCE_, (long long)n * (long long)size * (SWIR_RANKS - 1) / SWIR_RANKS * 2);
}

/* --stats: every rank's counters (the emulation's, then "mpi"), gathered on
 * rank 0 as {"ranks": [{"rank": 0, "mpi": {...}, "runs": ..., ...}, ...]}. */
static void ranks_stats(int runs)
{
#ifdef SWIR_EMU
    char *text = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&text, &size);
    if (f == NULL)
        fail("out of memory");
    fprintf(f, "{\"rank\": %d, \"mpi\": {", rank);
    for (int i = 0; i < N_COLLECTIVES; i++)
        fprintf(f, "%s\"%s\": {\"calls\": %lld, \"bytes_sent\": %lld}", i ? ", " : "",
                collectives[i].name, collectives[i].calls, collectives[i].bytes_sent);
    fputs("},\n ", f);
    long mark = ftell(f);     /* where the emulation's object starts */
    if (mark < 0 || swir_emu_write_stats_to(f, runs) != 0 || fclose(f) != 0)
        fail("out of memory");
    /* Its fields continue the object opened above: drop its '{'. */
    memmove(text + mark, text + mark + 1, strlen(text + mark));
    int length = mpi_bytes(strlen(text), "the counters");
    int lengths[SWIR_RANKS], offsets[SWIR_RANKS];
    check_mpi(MPI_Gather(&length, 1, MPI_INT, lengths, 1, MPI_INT, 0, MPI_COMM_WORLD),
              "MPI_Gather of the counters");
    long total = 0;
    for (int r = 0; ROOT && r < SWIR_RANKS; r++) {
        offsets[r] = (int)total;
        total += lengths[r];
    }
    char *all = ROOT ? malloc((size_t)total + 1) : NULL;
    if (ROOT && all == NULL)
        fail("out of memory");
    check_mpi(MPI_Gatherv(text, length, MPI_CHAR, all, lengths, offsets, MPI_CHAR, 0,
                          MPI_COMM_WORLD), "MPI_Gather of the counters");
    free(text);
    if (!ROOT)
        return;
    ranks_stats_text = malloc((size_t)total + 4 * SWIR_RANKS + 16);
    if (ranks_stats_text == NULL)
        fail("out of memory");
    char *at = ranks_stats_text + sprintf(ranks_stats_text, "{\"ranks\": [");
    for (int r = 0; r < SWIR_RANKS; r++) {
        int n = lengths[r];
        while (n > 0 && all[offsets[r] + n - 1] == '\n')
            n--;
        at += sprintf(at, "%s%.*s", r ? ",\n " : "", n, all + offsets[r]);
    }
    strcpy(at, "]}\n");
    free(all);
#else
    (void)runs;
#endif
}

static void end_ranks(void)
{
    /* A program need not make every kind of collective, nor read a weight. */
    (void)read_at;
    (void)swir_allgather;
    (void)swir_reduce_scatter;
    (void)swir_allreduce;
    MPI_Finalize();
}
