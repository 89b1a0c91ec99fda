/* A guest for scripts/check-platforms.sh: appends 1, 2, 3, ... (one a line) to
 * counter.txt in its working directory every 100 ms, forever, so the check sees
 * whether it runs (the file grows), is frozen (it stops) and is killed (no process).
 * `counter.exe probe` first writes probe.txt: its priority class, whether 256 MiB can be
 * committed, and how many of 10 children (`counter.exe sleep`, 3 s each) start: what
 * its Job Object's limits let through. */
#include <stdio.h>
#include <string.h>
#include <windows.h>

static void probe(void) {
  FILE *f = fopen("probe.txt", "w");
  if (!f) return;
  fprintf(f, "priority 0x%lx\n", (unsigned long)GetPriorityClass(GetCurrentProcess()));
  void *big = VirtualAlloc(NULL, 256u << 20, MEM_COMMIT | MEM_RESERVE, PAGE_READWRITE);
  fprintf(f, "alloc256 %s\n", big ? "ok" : "refused");
  if (big) VirtualFree(big, 0, MEM_RELEASE);
  char self[MAX_PATH], line[MAX_PATH + 16];
  GetModuleFileNameA(NULL, self, MAX_PATH);
  snprintf(line, sizeof line, "\"%s\" sleep", self);
  int started = 0;
  for (int i = 0; i < 10; i++) {
    STARTUPINFOA si = {sizeof si};
    PROCESS_INFORMATION pi;
    char cmd[MAX_PATH + 16];
    strcpy(cmd, line);
    if (CreateProcessA(NULL, cmd, NULL, NULL, FALSE, 0, NULL, NULL, &si, &pi)) {
      started++;
      CloseHandle(pi.hThread);
      CloseHandle(pi.hProcess);
    }
  }
  fprintf(f, "children %d\n", started);
  fclose(f);
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "sleep") == 0) {
    Sleep(3000);
    return 0;
  }
  if (argc > 1 && strcmp(argv[1], "probe") == 0) probe();
  for (unsigned long n = 1;; n++) {
    FILE *f = fopen("counter.txt", "a");
    if (f) {
      fprintf(f, "%lu\n", n);
      fclose(f);
    }
    Sleep(100);
  }
}
