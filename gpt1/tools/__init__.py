"""The tools beside the commands, with plain flags: ``gpt1 bench`` (speed: ``bench``, its steps; ``bench_measure``, its
timings and the device's ceilings; ``bench_hf``, HF's twin; ``bench_nanogpt``, nanoGPT's;
``bench_report``, its printout) and ``gpt1 report``
(sweep reports: ``report``; ``report_jobs``, reading a sweep's jobs; ``report_rows``, its rows of settings;
``report_tables`` and ``report_plots``, what it writes)."""
