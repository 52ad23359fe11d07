# Included by CTest after the GoogleTest discovery files (TEST_INCLUDE_FILES, tests/CMakeLists.txt):
# gives the suite's longest GoogleTest cases a high COST so that `ctest -j` starts them first.
# Without it a fresh build directory (no Testing/Temporary/CTestCostData.txt yet, as in CI) runs
# them in registration order, and the longest (over a minute under the sanitizers) starts late
# and runs alone at the end. Later runs use the measured costs. Only the order changes; a name
# that is not a test of this build (no GUI) is ignored. (No if(TEST): it needs a policy here.)
set_tests_properties(ShippedScenarios.EachReportsItsKeyNumbersWithChartsAndTables
                     Gui.ScreenshotOfEveryViewIsNotBlank
                     FastEngine.MatchesTheReferenceInFloat64
                     FastEngine.MatchesTheReferenceInFloat32
                     PROPERTIES COST 1000)
