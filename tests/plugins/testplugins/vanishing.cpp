// A dependency of missing_dep.cpp; the loader test deletes nothing: it lives in deps/, which is not on the
// rpath.
extern "C" __attribute__((visibility("default"))) int fresco_test_vanishing_value() {
  return 42;
}
