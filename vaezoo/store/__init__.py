"""Verified, atomic, locked bytes: safetensors I/O, downloads, checksums, atomic files, locks and size limits;
and the paths a user writes (``~`` and ``~USER``).

Imports no other folder of vaezoo; only its base modules (errors, terminal, devices, version).
"""
