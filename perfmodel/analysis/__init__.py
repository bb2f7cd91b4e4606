"""Questions answered with the model: limits in n (asymptotics), KV-cache and decode
sizing (kvcache), serving advice (advise), and what a profile's utilisation means
(diagnose). Numbers come from ``perfmodel.prediction`` and ``perfmodel.evaluate``.
"""
