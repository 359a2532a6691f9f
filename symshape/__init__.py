"""symshape: trace PyTorch programs once, with symbolic sizes."""

__version__ = "0.1.0"
