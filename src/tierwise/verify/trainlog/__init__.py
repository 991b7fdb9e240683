"""Training-log readers: what a Megatron-LM, Megatron-Bridge, NeMo, MLPerf or torchtitan run
says about its model, layout, GPUs and step time (`tierwise ingest training-log`).

Each reader fills a :class:`~tierwise.verify.trainlog.record.Found` with the values a log or
config states, each with where it was read; :func:`~tierwise.verify.trainlog.read.read_run`
picks the readers by content and returns a :class:`~tierwise.verify.trainlog.record.RunRecord`
that lists every field nobody stated rather than guessing it.
"""
