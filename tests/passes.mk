# The passes of `make test` and the test programs each one runs. Every
# tests/test_NAME.c is named here in exactly one of the three lists, by NAME
# (tests/passes.sh, run by make check, fails otherwise and says where a new
# one goes).
#
#   fast      built for this machine (the fast kernels): every program
#   portable  built with ARCH= (the plain C path any compiler takes): only
#             KERNEL_TESTS, whose results can depend on the kernels
#   asan      AddressSanitizer + UBSan: every program but BROWSER_TESTS
#
# KERNEL_TESTS: what they check is computed through the kernels of ops (bits
# against fixtures, cached against uncached, printed numbers, the lessons'
# figures, the claims made of them and the lesson pages' questions, which quote
# what a lesson prints), so the portable path must pass them too.
KERNEL_TESTS = test_attention test_claims test_docs test_flash test_gpt test_gptcmd test_kernels \
               test_kvcache test_kvpage test_kvquant test_kvwindow test_lesson10_reset test_lesson11 test_lesson3 \
               test_lesson4 test_lesson5 test_lesson61 test_lesson62 test_lesson63 test_lesson8 \
               test_lessons test_llama test_llama2c test_llama_convert test_llama_shipped \
               test_llama_state test_llama_window test_llamacmd test_matmul test_ops test_pools test_race \
               test_sampler test_spec test_tables test_tensor test_train test_train_llama \
               test_train_llama_run test_traincmd test_then test_llama_spec test_specbench
# ONCE_TESTS: what they check cannot depend on the kernels (options and help,
# error lines and languages, files and faults, parsers, the page's structure
# and colours, the build): the fast and sanitizer passes.
ONCE_TESTS   = test_bench test_benchmm test_chart_svg test_checkpoint test_cli test_colours test_corpus \
               test_errors test_faults test_fileguard test_iofault test_readers test_write_error test_heat test_html \
               test_install test_make test_measure test_memory test_names test_oom test_options test_threads \
               test_reliability test_screen test_stats \
               test_lesson13 test_step test_toydata test_trace test_utf8 test_zh \
               test_ttyguard test_kvvariant
# BROWSER_TESTS: chromium loads kvdemo's page; the fast pass only (making the
# page is test_html's, which the sanitizers run; the browser is not kvdemo).
BROWSER_TESTS = test_slides
