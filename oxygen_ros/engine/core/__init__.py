"""The serving core: Engine.step, the scheduler, requests and their KV, modes, frame intake. No torch
ownership here (the runner owns the model and its tensors)."""
