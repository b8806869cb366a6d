"""A fuzz campaign under pytest and Hypothesis: its options, budget, database, profiles and GPUs, the
per-example bookkeeping (`engine`) and the pytest plugin. Entry point: `fuzz.test_ckpt_grad_parity`.
Takes command-line options; gives a run folder and an exit status that agree."""
