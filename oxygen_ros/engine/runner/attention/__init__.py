from .paged import (load_cpp_op, paged_attention, paged_attention_cpp, paged_attention_reference,
                    select_backend)

__all__ = ["load_cpp_op", "paged_attention", "paged_attention_cpp", "paged_attention_reference",
           "select_backend"]
