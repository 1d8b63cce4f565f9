/* ---- main ---------------------------------------------------------------- */

int main(int argc, char **argv)
{
    struct options opt = {0};
    void *in[N_INPUTS + 1], *out[N_OUTPUTS + 1];
    FILE *files[N_INPUTS + 1];
    struct output outs[N_OUTPUTS + 2];
    char message[160];
    program = argc > 0 ? argv[0] : "program";
    SWIR_PROGRAM(program);
    parse_options(argc, argv, &opt);
    if (opt.n_inputs != N_INPUTS)
        fail("expected %d --input files, got %ld", N_INPUTS, opt.n_inputs);
    if (opt.n_outputs != 0 && opt.n_outputs != N_OUTPUTS)
        fail("expected %d --output files (or none), got %ld", N_OUTPUTS, opt.n_outputs);
    /* Every file is checked before anything is allocated or run. */
    memset(outs, 0, sizeof outs);
    long n_outs = opt.n_outputs;
    for (long i = 0; i < opt.n_outputs; i++) {
        check_output(&outs[i], opt.outputs[i]);
        outs[i].port = &output_ports[i];
    }
    if (opt.stats != NULL)
        check_output(&outs[n_outs++], opt.stats);
    check_distinct(outs, n_outs);
    for (long i = 0; i < N_INPUTS; i++)
        files[i] = open_input(opt.inputs[i], &input_ports[i],
                              input_what(message, sizeof message, i, &input_ports[i]), 1);
    FILE *weights_file = open_input(opt.weights, &weights_port, "weights file", 0);
    athread_init();
    load_constants(weights_file, opt.weights);
    place_buffers();
    for (long i = 0; i < N_INPUTS; i++) {
        in[i] = alloc_block(input_ports[i].bytes, input_ports[i].name);
        read_input(files[i], in[i], input_ports[i].bytes, opt.inputs[i],
                   input_what(message, sizeof message, i, &input_ports[i]));
    }
    for (long i = 0; i < N_OUTPUTS; i++)
        out[i] = alloc_block(output_ports[i].bytes, output_ports[i].name);
    for (long i = 0; i < opt.n_outputs; i++)
        outs[i].data = out[i];
    for (long r = 0; r < opt.repeat; r++)
        swir_run(in, out);
    write_outputs(outs, n_outs, (int)opt.repeat);
    athread_halt();
    free_blocks();
    free(opt.inputs);
    free(opt.outputs);
    free(opt.weights_default);
    return 0;
}
