/* ---- main ---------------------------------------------------------------- */

int main(int argc, char **argv)
{
    struct options opt = {0};
    void *in[N_INPUTS + 1], *out[N_OUTPUTS + 1];
    void *whole_out[N_OUTPUTS + 1];
    FILE *files[N_INPUTS + 1] = {NULL};
    struct output outs[N_OUTPUTS + 2];
    char *what[N_INPUTS + 1];
    program = argc > 0 ? argv[0] : "program";
    SWIR_PROGRAM(program);
    catch_signals();                    /* held until MPI's threads have started */
    start_ranks(&argc, &argv);
    hold_signals(0);
    parse_options(argc, argv, &opt);
    if (opt.n_inputs != N_INPUTS)
        fail("expected %d --input files, got %ld", N_INPUTS, opt.n_inputs);
    if (opt.n_outputs != 0 && opt.n_outputs != N_OUTPUTS)
        fail("expected %d --output files (or none), got %ld", N_OUTPUTS, opt.n_outputs);
    /* Every file is checked before anything is allocated or run (inputs and
     * outputs by the rank that reads and writes them). */
    memset(outs, 0, sizeof outs);
    long n_outs = opt.n_outputs;
    for (long i = 0; ROOT && i < opt.n_outputs; i++) {
        check_output(&outs[i], opt.outputs[i]);
        outs[i].port = &output_ports[i];
    }
    if (ROOT && opt.stats != NULL)
        check_output(&outs[n_outs++], opt.stats);
    if (ROOT)
        check_distinct(outs, n_outs);
    for (long i = 0; i < N_INPUTS; i++)
        what[i] = input_what(i, &input_ports[i]);
    for (long i = 0; ROOT && i < N_INPUTS; i++)
        files[i] = open_input(opt.inputs[i], &input_ports[i], what[i], 1);
    FILE *weights_file = open_input(opt.weights, &weights_port, "weights file", 0);
    /* Every rank has checked what it checks: an error all of them met was
     * reported once (program_ranks.c). */
    all_checked();
    hold_signals(1);                    /* the CPE threads start with them blocked */
    athread_init();
    hold_signals(0);
    load_constants(weights_file, opt.weights);
    place_buffers();
    /* A rank's blocks hold its share (SHARE: how many ranks share the batch);
     * the whole outputs are rank 0's. */
    for (long i = 0; i < N_INPUTS; i++) {
        in[i] = alloc_block(input_ports[i].bytes / SHARE, input_ports[i].name);
        read_share(files[i], in[i], &input_ports[i], opt.inputs[i], what[i], opt.scatter);
    }
    for (long i = 0; i < N_OUTPUTS; i++) {
        size_t bytes = output_ports[i].bytes;
        out[i] = alloc_block(bytes / SHARE, output_ports[i].name);
        whole_out[i] = SHARE == 1 ? out[i] : ROOT ? alloc_block(bytes, output_ports[i].name)
                                                   : NULL;
    }
    for (long r = 0; r < opt.repeat; r++)
        swir_run(in, out);
    for (long i = 0; i < N_OUTPUTS; i++)
        collect_output(out[i], whole_out[i], output_ports[i].bytes);
    for (long i = 0; i < opt.n_outputs; i++)
        outs[i].data = whole_out[i];
    if (opt.stats != NULL)
        ranks_stats((int)opt.repeat);
    if (ROOT)
        write_outputs(outs, n_outs, (int)opt.repeat);
    /* No --output: the results on stdout, as swir-run prints them. */
    if (ROOT && opt.n_outputs == 0)
        print_results(output_ports, N_OUTPUTS, whole_out);
    athread_halt();
    end_ranks();
    free_blocks();
    for (long i = 0; i < N_INPUTS; i++)
        free(what[i]);
    free(opt.inputs);
    free(opt.outputs);
    free(opt.weights_default);
    return 0;
}
