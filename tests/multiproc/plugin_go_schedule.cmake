# The Go plugin go_schedule (plugins/go_schedule/): the pipeline executor runs its eager_1f1b
# schedule on 1-4 ranks against single-process training (test_plugin_go_schedule.cpp); the
# _inject run corrupts every checked value once and must catch each. Only when go was found.
if(NOT TARGET weft_plugin_go_schedule)
  return()
endif()
weft_mp_gtest(weft_mp_plugin_go_schedule test_plugin_go_schedule.cpp)
target_link_libraries(weft_mp_plugin_go_schedule PRIVATE weft_mp_pipeline_model)
add_dependencies(weft_mp_plugin_go_schedule weft_plugin_go_schedule)
foreach(n 1 2 3 4)
  weft_mp_test(mp_plugin_go_schedule_n${n} ${n} TIMEOUT 300 ENV WEFT_TEST_PLUGIN=${WEFT_GO_SCHEDULE_PLUGIN}
               COMMAND weft_mp_plugin_go_schedule --gtest_brief=1)
  set_tests_properties(mp_plugin_go_schedule_n${n} PROPERTIES LABELS "multiproc;plugin")
endforeach()
weft_mp_test(mp_plugin_go_schedule_inject_n3 3 TIMEOUT 300
             ENV WEFT_TEST_PLUGIN=${WEFT_GO_SCHEDULE_PLUGIN} WEFT_TEST_INJECT=1
             COMMAND weft_mp_plugin_go_schedule --gtest_brief=1)
set_tests_properties(mp_plugin_go_schedule_inject_n3 PROPERTIES LABELS "multiproc;plugin")
# weft-schedule with --plugin: eager_1f1b by its entry name, simulated with F = 1, B = 2 on
# p = 4, m = 8: the makespan is 1F1B's closed form (m + p - 1)(F + B) = 33 (plugins/go_schedule/
# README.md says why the extra warm-up costs no time under this model). The _inject entry expects
# 34 and must fail, proving the check can.
if(TARGET weft-schedule)
  add_test(NAME tools.weft_schedule_plugin_go
           COMMAND weft-schedule show eager_1f1b -p 4 -m 8 --plugin ${WEFT_GO_SCHEDULE_PLUGIN})
  set_tests_properties(tools.weft_schedule_plugin_go PROPERTIES LABELS "plugin" TIMEOUT 60
                       PASS_REGULAR_EXPRESSION "schedule: eager_1f1b p=4 S=4 m=8 v=1\nvalid\n.*makespan 33\n")
  add_test(NAME tools.weft_schedule_plugin_go_inject
           COMMAND weft-schedule show eager_1f1b -p 4 -m 8 --plugin ${WEFT_GO_SCHEDULE_PLUGIN})
  set_tests_properties(tools.weft_schedule_plugin_go_inject PROPERTIES LABELS "plugin" TIMEOUT 60
                       PASS_REGULAR_EXPRESSION "makespan 34\n" WILL_FAIL TRUE)
endif()
