"""Transcribe raw audio with a trained model: :class:`asrtrain.transcribe.model.Transcriber`."""
