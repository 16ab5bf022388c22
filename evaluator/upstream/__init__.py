"""The libraries people ship (OpenBLAS, ggml, ONNX Runtime's MLAS): built for a target, used as baselines.

A built library is described by a manifest (`BuiltLibrary`, `eok-library.json` in its cache folder): the
one contract between building it (build.py), evaluating against it (the library baseline) and exporting a
kernel into it (agent/export).
"""
