# The C++ plugin cpp_router_cost (plugins/cpp_router_cost/): routing with its balanced_topk
# selector, dispatch / combine on 1-4 ranks and simulation / tuning with its linear cost model,
# against references written in the test (test_plugin_cpp_router_cost.cpp); the _inject run
# corrupts every checked result once and must catch each.
if(NOT TARGET weft_plugin_cpp_router_cost)
  return()
endif()
weft_mp_gtest(weft_mp_plugin_cpp_router_cost test_plugin_cpp_router_cost.cpp)
add_dependencies(weft_mp_plugin_cpp_router_cost weft_plugin_cpp_router_cost)
foreach(n 1 2 3 4)
  weft_mp_test(mp_plugin_cpp_router_cost_n${n} ${n} TIMEOUT 300 ENV WEFT_TEST_PLUGIN=${WEFT_CPP_ROUTER_COST_PLUGIN}
               COMMAND weft_mp_plugin_cpp_router_cost --gtest_brief=1)
  set_tests_properties(mp_plugin_cpp_router_cost_n${n} PROPERTIES LABELS "multiproc;plugin")
endforeach()
weft_mp_test(mp_plugin_cpp_router_cost_inject_n3 3 TIMEOUT 300
             ENV WEFT_TEST_PLUGIN=${WEFT_CPP_ROUTER_COST_PLUGIN} WEFT_TEST_INJECT=1
             COMMAND weft_mp_plugin_cpp_router_cost --gtest_brief=1)
set_tests_properties(mp_plugin_cpp_router_cost_inject_n3 PROPERTIES LABELS "multiproc;plugin")
# weft-schedule with --cost-model: GPipe, p = 4, m = 8, micro-batch size 4 under "linear"
# (F = 0.5 + 0.25 * 4 = 1.5, B = 3): (m + p - 1)(F + B) = 49.5. The _inject entry expects 50.5
# and must fail.
if(TARGET weft-schedule)
  add_test(NAME tools.weft_schedule_plugin_cost
           COMMAND weft-schedule show gpipe -p 4 -m 8 --plugin ${WEFT_CPP_ROUTER_COST_PLUGIN} --cost-model linear --mbs 4)
  set_tests_properties(tools.weft_schedule_plugin_cost PROPERTIES LABELS "plugin" TIMEOUT 60
                       PASS_REGULAR_EXPRESSION "costs: cost model linear, micro-batch size 4\nmakespan 49.5\n")
  add_test(NAME tools.weft_schedule_plugin_cost_inject
           COMMAND weft-schedule show gpipe -p 4 -m 8 --plugin ${WEFT_CPP_ROUTER_COST_PLUGIN} --cost-model linear --mbs 4)
  set_tests_properties(tools.weft_schedule_plugin_cost_inject PROPERTIES LABELS "plugin" TIMEOUT 60
                       PASS_REGULAR_EXPRESSION "makespan 50.5\n" WILL_FAIL TRUE)
endif()
