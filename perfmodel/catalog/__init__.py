"""What the model is evaluated on: devices, model configurations, workloads and
calibration profiles, each a schema here and sourced data in ``specs/``.

Nothing here knows a cost formula; the model core (``perfmodel.evaluate``) reads these.
"""
