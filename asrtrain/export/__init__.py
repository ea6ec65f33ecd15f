"""Export the acoustic model for deployment: ONNX or TorchScript, checked against torch when written.

:mod:`.graph` turns the BLSTM into a graph (features + lengths -> log-probs + lengths) and checks it;
:mod:`.bundle` writes the directory a deployment reads (the graph, fbank options, CMVN, tokens, a
manifest). :mod:`asrtrain.transcribe.onnx_engine` runs an ONNX bundle without torch.
"""
