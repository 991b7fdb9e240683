"""A training run's log against the model: price the run as it ran (`price`), compare and
explain the gap with what-ifs that each flip one flag (`diagnose`), fit the cluster's step
constants on several runs (`fit`)."""
