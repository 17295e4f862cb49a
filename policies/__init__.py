"""Behavior-cloning policies: flow matching, diffusion, a tiny VLA; encoders and normaliser.

Every policy is an ``nn.Module`` following :class:`robotrl.types.ChunkPolicy`; flow policies
also follow :class:`robotrl.types.ChainPolicy`. Checkpoints are safetensors weights plus the
resolved constructor config (``policies/checkpoint.py``): loading needs no pickle.
"""
