"""The compile cache: artifacts of slow compilations kept across processes.

``disk`` is the local tier every backend reads and writes through (``DiskCache``);
``remote`` the tier many machines share, with its stores (``redis_store``, built in; more
through ``jit_register_cache_stores``); ``cli`` is ``python -m jit_core.cache``.
"""
