// isa_namespace.hpp - where the kernels' code lives in each copy built per instruction set.
//
// The kernel headers wrap their functions (not their plain data structs, which carry no code and
// are shared by every copy) in HEADGRAD_ISA_BEGIN ... HEADGRAD_ISA_END inside
// namespace headgrad::engine. In the normal build those are empty. In a per-instruction-set copy
// (framework/engine/kernels/isa/, compiled with HEADGRAD_ISA_NS=isa_avx2 etc.) they open the inline
// namespace headgrad::engine::isa_avx2, so every template and inline function compiled there
// has a name of its own: the linker cannot hand an AVX2 instance to baseline code (or the reverse),
// which with one shared name it could, since it keeps one copy of an inline function per program.
#pragma once

#ifdef HEADGRAD_ISA_NS
#define HEADGRAD_ISA_BEGIN inline namespace HEADGRAD_ISA_NS {
#define HEADGRAD_ISA_END }
#else
#define HEADGRAD_ISA_BEGIN
#define HEADGRAD_ISA_END
#endif
