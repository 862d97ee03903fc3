/*
 * A consumer of the installed opslib (find_package + opslib::opslib) that, like many real
 * programs, defines functions with common names. libopslib.a must not define any of them:
 * the link would fail or, worse, bind the library's calls to these. It then runs an op on
 * the CPU backend and checks the result.
 */
#include <math.h>
#include <stdio.h>

#include <opslib/opslib.h>

int launch(int x);
int run(int x);
int step(int x);
int geom_of(int x);
int cuda_status(int x);
int launch(int x) { return x + 1; }
int run(int x) { return launch(x) * 2; }
int step(int x) { return run(x) - 1; }
int geom_of(int x) { return step(x) + 3; }
int cuda_status(int x) { return geom_of(x) - x; }

int main(void) {
  if (cuda_status(5) != 9) { /* ((5 + 1) * 2 - 1 + 3) - 5 */
    printf("consumer: its own functions were replaced\n");
    return 1;
  }
  float x[6] = {0, 1, 2, 3, 4, 5}, y[6];
  const int64_t shape[2] = {2, 3};
  ops_tensor tx, ty;
  ops_handle h;
  if (ops_handle_create(&h, ops_device_cpu()) != OPS_OK ||
      ops_tensor_init(&tx, x, OPS_DTYPE_F32, ops_device_cpu(), 2, shape, NULL) != OPS_OK ||
      ops_tensor_init(&ty, y, OPS_DTYPE_F32, ops_device_cpu(), 2, shape, NULL) != OPS_OK ||
      ops_softmax(h, NULL, &tx, &ty, NULL, 0) != OPS_OK) {
    printf("consumer: %s\n", ops_last_error());
    return 1;
  }
  const double e1 = exp(1.0), e2 = exp(2.0), sum = 1.0 + e1 + e2;
  const double want[3] = {1.0 / sum, e1 / sum, e2 / sum};
  for (int i = 0; i < 6; ++i) {
    if (fabs(y[i] - want[i % 3]) > 1e-6) {
      printf("consumer: softmax[%d] = %g, expected %g\n", i, y[i], want[i % 3]);
      return 1;
    }
  }
  ops_handle_destroy(h);
  printf("consumer: opslib %s through opslib::opslib, softmax correct, its own launch/run/step/geom_of/cuda_status "
         "intact\n", ops_version_string());
  return 0;
}
