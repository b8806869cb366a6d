"""How a network is run: eager, the float64 reference, nudged copies and thunderfx (with either
converter, `fuzz.fix`), under time limits, each step marked with its phase.
Takes an `Example` (`fuzz.model_builder`); gives outputs and gradients, and thunder's compile report."""
