// Cooperative cancellation: SIGTERM/SIGINT set a flag that the run loops poll at step
// boundaries, so a cancelled run never leaves a half-written checkpoint behind.
#pragma once

namespace headlab {

// Exit status of a run stopped by SIGTERM (128 + SIGTERM, as the shell reports it).
inline constexpr int kExitStopped = 143;

// Installs the SIGTERM and SIGINT handlers. Call once, early in ExecMain.
void InstallStopHandler();
// Returns true iff a stop signal has arrived since InstallStopHandler (or a RequestStop).
bool StopRequested();
// Sets the flag as a signal would (tests).
void RequestStop();
// Clears the flag (tests).
void ClearStop();

}  // namespace headlab
