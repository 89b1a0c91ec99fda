/* A guest for scripts/check-platforms.sh: appends 1, 2, 3, ... (one a line) to
 * counter.txt in its working directory every 100 ms, forever, so the check sees
 * whether it runs (the file grows), is frozen (it stops) and is killed (no process). */
#include <stdio.h>
#include <windows.h>

int main(void) {
  for (unsigned long n = 1;; n++) {
    FILE *f = fopen("counter.txt", "a");
    if (f) {
      fprintf(f, "%lu\n", n);
      fclose(f);
    }
    Sleep(100);
  }
}
