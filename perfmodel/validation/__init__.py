"""The model against the GPU: the measurement file schema (measured), the comparison and
calibration fit (compare, fitting), and their text and figures (report, figures).
"""
