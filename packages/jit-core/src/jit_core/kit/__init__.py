"""What backend packages build on: the ONNX export the ONNX-based backends share
(``onnx``: the direct exporter, paddle2onnx for what it cannot lower, the check against
Paddle), one build per input shape for a backend without dynamic shapes
(``shape_dispatch``), the value bounds of index inputs (``index_bounds``) and Paddle's
static build of a graph (``static_build``)."""
