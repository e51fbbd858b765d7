"""Test session set-up: eight host CPU devices (for jax.shard_map tests), set before JAX starts."""
import os
import sys

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
sys.path.insert(0, os.path.dirname(__file__))
