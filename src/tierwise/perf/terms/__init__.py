"""One module per cost term of a training step, each a pure function of the busiest stage.

`stage.Stage` holds what every term reads (layout fields, the stage's FLOPs, tokens and
activation bytes per micro-batch). `compute` prices the GEMMs, the attention core and the
elementwise work; `tp`, `cp`, `ep`, `pp` and `dp` each return a `stage.CommTerm`: exposed
and total seconds, bytes sent per GPU and the group kind whose tier they cross. Everything
takes python scalars or numpy arrays of layouts alike. `tierwise.perf.step` composes them.
"""
