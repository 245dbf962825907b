"""GraphNet's sample format, read and written: a folder with ``model.py`` (a
``GraphModule`` class), ``weight_meta.py`` and ``input_meta.py`` (the tensors' specs) and
``graph_net.json``. ``samples`` reads and loads one (what ``jit-eval`` runs), ``writer``
writes one, ``extract`` writes every graph a capture makes (``jit_core.extract``)."""
