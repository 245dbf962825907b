"""Frame codegen: the bytecode that replaces a captured frame."""
