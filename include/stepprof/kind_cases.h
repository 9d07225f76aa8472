/*
 * kind_cases.h - the cases of a switch over every record kind but STRING (whose
 * layout is its own): include it inside `switch (kind) { ... }` with
 * SP_KIND_CASE(K) defined as what to do for kind K (a constant, so that the
 * call is that kind's inlined path). Each case ends with a break.
 */
#ifndef SP_KIND_CASE
#error "define SP_KIND_CASE(K) before including kind_cases.h"
#endif
#define SP_KIND(id, num, name, mask)                                                                                   \
	case SP_K_##id:                                                                                                \
		if (SP_K_##id != SP_K_STRING)                                                                          \
			SP_KIND_CASE(SP_K_##id);                                                                       \
		break;
#include "kinds.def"
#undef SP_KIND
