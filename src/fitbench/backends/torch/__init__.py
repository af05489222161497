"""The PyTorch backend (torch, transformers, optionally torchvision and bitsandbytes).

Imported only by fitbench.backends.get_backend("torch"), inside a measurement's child process
or a test: never by `import fitbench`. The backend is fitbench.backends.torch.backend.TorchBackend;
importing this package registers nothing.
"""
