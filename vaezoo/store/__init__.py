"""Verified, atomic, locked bytes: safetensors I/O, downloads, checksums, atomic files, locks and size limits.

Imports no other folder of vaezoo; only its base modules (errors, terminal, devices, version).
"""
