/* A guest for scripts/check-platforms.sh: appends 1, 2, 3, ... (one a line) to
 * counter.txt in its working directory every 100 ms, forever, so the check sees
 * whether it runs (the file grows), is frozen (it stops) and is killed (no process).
 * `counter.exe probe` first writes probe.txt: its priority class, whether 256 MiB can be
 * committed, and how many of 10 children (`counter.exe sleep`, 3 s each) start: what
 * its Job Object's limits let through. `counter.exe break` counts too, and on
 * CTRL_BREAK_EVENT (the agent's checkpoint signal) writes break.txt and exits 0.
 * `counter.exe fill N` writes N MiB to fill.bin in its working directory and `counter.exe
 * spew N` N MiB to its stdout, 64 KiB a write, then counts (the disk and output caps). */
#include <stdio.h>
#include <stdlib.h>
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

static volatile LONG broken;

static BOOL WINAPI on_ctrl(DWORD event) {
  if (event != CTRL_BREAK_EVENT) return FALSE;
  FILE *f = fopen("break.txt", "w");
  if (f) {
    fprintf(f, "CTRL_BREAK_EVENT\n");
    fclose(f);
  }
  InterlockedExchange(&broken, 1);
  return TRUE;
}

static void write_mib(FILE *f, long mib) {
  static char block[64 << 10];
  memset(block, 'x', sizeof block);
  for (long i = 0; i < mib * 16; i++) fwrite(block, 1, sizeof block, f);
  fflush(f);
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "sleep") == 0) {
    Sleep(3000);
    return 0;
  }
  if (argc > 1 && strcmp(argv[1], "probe") == 0) probe();
  if (argc > 1 && strcmp(argv[1], "break") == 0 && !SetConsoleCtrlHandler(on_ctrl, TRUE)) {
    FILE *f = fopen("break.txt", "w");
    if (f) {
      fprintf(f, "SetConsoleCtrlHandler failed: %lu\n", (unsigned long)GetLastError());
      fclose(f);
    }
  }
  if (argc > 2 && strcmp(argv[1], "fill") == 0) {
    FILE *f = fopen("fill.bin", "wb");
    if (f) {
      write_mib(f, atol(argv[2]));
      fclose(f);
    }
  }
  if (argc > 2 && strcmp(argv[1], "spew") == 0) write_mib(stdout, atol(argv[2]));
  for (unsigned long n = 1; !broken; n++) {
    FILE *f = fopen("counter.txt", "a");
    if (f) {
      fprintf(f, "%lu\n", n);
      fclose(f);
    }
    Sleep(100);
  }
}
