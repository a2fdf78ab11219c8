"""pytest plugins loaded with -p inside the benchmark process. The only code that imports torch,
triton or flag_gems. Each reads its settings from the JSON file named by ZLBENCH_PLUGIN_CONFIG."""
