"""What runs on every call of an optimized function: the frame hook (``eval_frame``) and
the direct entry into target frames (``direct_entry``), the code cache with its guards
(``frame_cache``, ``guards``, ``fast_dispatch``), the generated calls between graphs and
resume functions (``frame_calls``), which files are never captured (``skipfiles``), and
a capture from start to replacement code (``convert_frame``, ``convert_break``).
"""
