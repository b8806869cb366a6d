"""What the fuzzer draws: the spec (plain data), the layer kinds and the op family, the decoder and
model-zoo families, the op sweep's cases, and the spec-level reduction of a failing spec.
Takes choices (Hypothesis's, or a spec file); gives `NetSpec`s. Entry point: `fuzz.strategies`."""
