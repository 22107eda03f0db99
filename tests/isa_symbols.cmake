# isa_symbols.cmake - the per-instruction-set objects (framework/engine/kernels/isa/) must define no
# global or weak symbol outside their own namespace (headgrad::engine::isa_<name>): an inline function or template of any other
# namespace compiled there would carry AVX-512 (or AVX2) instructions, and the linker keeps one
# copy of such a symbol for the whole program, so the baseline code could end up calling it on a
# CPU without those instructions.
#   cmake -DNM=nm -DOBJECTS="isa|a.o|b.o;isa2|c.o" -P isa_symbols.cmake
set(bad "")
foreach(group ${OBJECTS})
  string(REPLACE "|" ";" items "${group}")
  list(POP_FRONT items isa)
  foreach(obj ${items})
    execute_process(COMMAND ${NM} -C --defined-only ${obj} OUTPUT_VARIABLE out RESULT_VARIABLE rc)
    if(rc)
      message(FATAL_ERROR "${NM} ${obj} failed")
    endif()
    string(REPLACE "\n" ";" lines "${out}")
    foreach(line ${lines})
      # "address TYPE name": upper-case types (and u, v, w, i) are visible to the linker
      if(line MATCHES "^[0-9a-f]* ([A-Zuvwi]) (.*)$")
        set(name "${CMAKE_MATCH_2}")
        # a name of this copy's namespace, or one with it as a template argument (unique too); and
        # the C++ runtime's personality-routine pointer every object with exception tables has
        if(NOT name MATCHES "headgrad::engine::isa_${isa}::" AND NOT name STREQUAL "DW.ref.__gxx_personality_v0")
          string(APPEND bad "  ${obj}: ${CMAKE_MATCH_1} ${name}\n")
        endif()
      endif()
    endforeach()
  endforeach()
endforeach()
if(bad)
  message(FATAL_ERROR "symbols outside headgrad::engine::isa_<name> in the per-instruction-set objects:\n${bad}")
endif()
message(STATUS "per-instruction-set objects: every visible symbol in its own namespace")
