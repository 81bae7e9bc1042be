/* Device properties and attributes of the emulated HIP runtime. The values
 * describe a CPU-backed device honestly where a field has a meaning here
 * (memory size, unified addressing, host mapping) and give conventional
 * limits elsewhere. */
#define _GNU_SOURCE
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "emu_hip.h"

typedef struct {
  char bytes[16];
} hipUUID;

typedef struct {
  unsigned hasGlobalInt32Atomics : 1;
  unsigned hasGlobalFloatAtomicExch : 1;
  unsigned hasSharedInt32Atomics : 1;
  unsigned hasSharedFloatAtomicExch : 1;
  unsigned hasFloatAtomicAdd : 1;
  unsigned hasGlobalInt64Atomics : 1;
  unsigned hasSharedInt64Atomics : 1;
  unsigned hasDoubles : 1;
  unsigned hasWarpVote : 1;
  unsigned hasWarpBallot : 1;
  unsigned hasWarpShuffle : 1;
  unsigned hasFunnelShift : 1;
  unsigned hasThreadFenceSystem : 1;
  unsigned hasSyncThreadsExt : 1;
  unsigned hasSurfaceFuncs : 1;
  unsigned has3dGrid : 1;
  unsigned hasDynamicParallelism : 1;
} hipDeviceArch_t;

/* HIP 6+ device properties (hipDeviceProp_tR0600), field for field. */
typedef struct {
  char name[256];
  hipUUID uuid;
  char luid[8];
  unsigned int luidDeviceNodeMask;
  size_t totalGlobalMem;
  size_t sharedMemPerBlock;
  int regsPerBlock;
  int warpSize;
  size_t memPitch;
  int maxThreadsPerBlock;
  int maxThreadsDim[3];
  int maxGridSize[3];
  int clockRate;
  size_t totalConstMem;
  int major;
  int minor;
  size_t textureAlignment;
  size_t texturePitchAlignment;
  int deviceOverlap;
  int multiProcessorCount;
  int kernelExecTimeoutEnabled;
  int integrated;
  int canMapHostMemory;
  int computeMode;
  int maxTexture1D;
  int maxTexture1DMipmap;
  int maxTexture1DLinear;
  int maxTexture2D[2];
  int maxTexture2DMipmap[2];
  int maxTexture2DLinear[3];
  int maxTexture2DGather[2];
  int maxTexture3D[3];
  int maxTexture3DAlt[3];
  int maxTextureCubemap;
  int maxTexture1DLayered[2];
  int maxTexture2DLayered[3];
  int maxTextureCubemapLayered[2];
  int maxSurface1D;
  int maxSurface2D[2];
  int maxSurface3D[3];
  int maxSurface1DLayered[2];
  int maxSurface2DLayered[3];
  int maxSurfaceCubemap;
  int maxSurfaceCubemapLayered[2];
  size_t surfaceAlignment;
  int concurrentKernels;
  int ECCEnabled;
  int pciBusID;
  int pciDeviceID;
  int pciDomainID;
  int tccDriver;
  int asyncEngineCount;
  int unifiedAddressing;
  int memoryClockRate;
  int memoryBusWidth;
  int l2CacheSize;
  int persistingL2CacheMaxSize;
  int maxThreadsPerMultiProcessor;
  int streamPrioritiesSupported;
  int globalL1CacheSupported;
  int localL1CacheSupported;
  size_t sharedMemPerMultiprocessor;
  int regsPerMultiprocessor;
  int managedMemory;
  int isMultiGpuBoard;
  int multiGpuBoardGroupID;
  int hostNativeAtomicSupported;
  int singleToDoublePrecisionPerfRatio;
  int pageableMemoryAccess;
  int concurrentManagedAccess;
  int computePreemptionSupported;
  int canUseHostPointerForRegisteredMem;
  int cooperativeLaunch;
  int cooperativeMultiDeviceLaunch;
  size_t sharedMemPerBlockOptin;
  int pageableMemoryAccessUsesHostPageTables;
  int directManagedMemAccessFromHost;
  int maxBlocksPerMultiProcessor;
  int accessPolicyMaxWindowSize;
  size_t reservedSharedMemPerBlock;
  int hostRegisterSupported;
  int sparseHipArraySupported;
  int hostRegisterReadOnlySupported;
  int timelineSemaphoreInteropSupported;
  int memoryPoolsSupported;
  int gpuDirectRDMASupported;
  unsigned int gpuDirectRDMAFlushWritesOptions;
  int gpuDirectRDMAWritesOrdering;
  unsigned int memoryPoolSupportedHandleTypes;
  int deferredMappingHipArraySupported;
  int ipcEventSupported;
  int clusterLaunch;
  int unifiedFunctionPointers;
  int reserved[63];
  int hipReserved[32];
  char gcnArchName[256];
  size_t maxSharedMemoryPerMultiProcessor;
  int clockInstructionRate;
  hipDeviceArch_t arch;
  unsigned int *hdpMemFlushCntl;
  unsigned int *hdpRegFlushCntl;
  int cooperativeMultiDeviceUnmatchedFunc;
  int cooperativeMultiDeviceUnmatchedGridDim;
  int cooperativeMultiDeviceUnmatchedBlockDim;
  int cooperativeMultiDeviceUnmatchedSharedMem;
  int isLargeBar;
  int asicRevision;
} hipDeviceProp_tR0600;

_Static_assert(sizeof(hipDeviceArch_t) == 4, "hipDeviceArch_t layout");
_Static_assert(sizeof(hipDeviceProp_tR0600) == 1472, "hipDeviceProp_tR0600 layout");

#define EMU_DEVICE_NAME "hipfile emulated device (CPU)"
#define EMU_ARCH_NAME "gfx000"

static hipError_t emu_check_device(int device) {
  int count = emu_device_count();
  if (count == 0) return hipErrorNoDevice;
  if (device < 0 || device >= count) return hipErrorInvalidDevice;
  return hipSuccess;
}

static void emu_fill_props(hipDeviceProp_tR0600 *p, int device) {
  memset(p, 0, sizeof(*p));
  snprintf(p->name, sizeof(p->name), "%s", EMU_DEVICE_NAME);
  char uuid[32];
  snprintf(uuid, sizeof(uuid), "emulated%08x", (unsigned)device);
  memcpy(p->uuid.bytes, uuid, sizeof(p->uuid.bytes));
  p->totalGlobalMem = emu_device_memory_total();
  p->sharedMemPerBlock = 64 * 1024;
  p->regsPerBlock = 65536;
  p->warpSize = 64;
  p->memPitch = (size_t)INT_MAX;
  p->maxThreadsPerBlock = 1024;
  p->maxThreadsDim[0] = p->maxThreadsDim[1] = p->maxThreadsDim[2] = 1024;
  p->maxGridSize[0] = INT_MAX;
  p->maxGridSize[1] = p->maxGridSize[2] = 65536;
  p->clockRate = 1000000; /* kHz */
  p->totalConstMem = 64 * 1024;
  p->major = 0;
  p->minor = 0;
  p->textureAlignment = 256;
  p->texturePitchAlignment = 256;
  p->deviceOverlap = 1;
  p->multiProcessorCount = 1;
  p->canMapHostMemory = 1;
  p->surfaceAlignment = 256;
  p->concurrentKernels = 1;
  p->pciBusID = device + 1;
  p->asyncEngineCount = 1;
  p->unifiedAddressing = 1;
  p->memoryClockRate = 1000000;
  p->memoryBusWidth = 64;
  p->maxThreadsPerMultiProcessor = 2048;
  p->streamPrioritiesSupported = 1;
  p->sharedMemPerMultiprocessor = 64 * 1024;
  p->regsPerMultiprocessor = 65536;
  p->isMultiGpuBoard = 0;
  p->canUseHostPointerForRegisteredMem = 1;
  p->sharedMemPerBlockOptin = 64 * 1024;
  p->maxBlocksPerMultiProcessor = 2;
  p->hostRegisterSupported = 1;
  p->hostRegisterReadOnlySupported = 1;
  snprintf(p->gcnArchName, sizeof(p->gcnArchName), "%s", EMU_ARCH_NAME);
  p->maxSharedMemoryPerMultiProcessor = 64 * 1024;
  p->clockInstructionRate = 1000000;
}

EMU_EXPORT hipError_t hipGetDevicePropertiesR0600(hipDeviceProp_tR0600 *props, int device) {
  if (props == NULL) return emu_ret(hipErrorInvalidValue);
  hipError_t status = emu_check_device(device);
  if (status != hipSuccess) return emu_ret(status);
  emu_fill_props(props, device);
  return hipSuccess;
}

/* HIP 6+ headers map hipGetDeviceProperties to the R0600 symbol; the plain
 * name is exported with the same (R0600) layout for callers that bind it. */
EMU_EXPORT hipError_t hipGetDeviceProperties(hipDeviceProp_tR0600 *props, int device) {
  return hipGetDevicePropertiesR0600(props, device);
}

/* hipDeviceAttribute_t values (HIP 6/7 numbering) of the attributes this
 * runtime answers; others give hipErrorInvalidValue. */
enum {
  emuAttrAsyncEngineCount = 2,
  emuAttrCanMapHostMemory = 3,
  emuAttrCanUseHostPointerForRegisteredMem = 4,
  emuAttrClockRate = 5,
  emuAttrComputeMode = 6,
  emuAttrConcurrentKernels = 8,
  emuAttrConcurrentManagedAccess = 9,
  emuAttrIntegrated = 16,
  emuAttrL2CacheSize = 19,
  emuAttrComputeCapabilityMajor = 23,
  emuAttrManagedMemory = 24,
  emuAttrMaxBlockDimX = 26,
  emuAttrMaxBlockDimY = 27,
  emuAttrMaxBlockDimZ = 28,
  emuAttrMaxGridDimX = 29,
  emuAttrMaxGridDimY = 30,
  emuAttrMaxGridDimZ = 31,
  emuAttrMaxThreadsPerBlock = 56,
  emuAttrMaxThreadsPerMultiProcessor = 57,
  emuAttrMemoryBusWidth = 59,
  emuAttrMemoryClockRate = 60,
  emuAttrComputeCapabilityMinor = 61,
  emuAttrMultiprocessorCount = 63,
  emuAttrPageableMemoryAccess = 65,
  emuAttrPciBusId = 67,
  emuAttrPciDeviceId = 68,
  emuAttrPciDomainId = 69,
  emuAttrMaxSharedMemoryPerBlock = 74,
  emuAttrStreamPrioritiesSupported = 78,
  emuAttrUnifiedAddressing = 85,
  emuAttrWarpSize = 87,
  emuAttrMemoryPoolsSupported = 88,
  emuAttrHostRegisterSupported = 90,
  emuAttrIsLargeBar = 10011,
  emuAttrCanUseStreamWaitValue = 10013
};

EMU_EXPORT hipError_t hipDeviceGetAttribute(int *value, int attribute, int device) {
  if (value == NULL) return emu_ret(hipErrorInvalidValue);
  hipError_t status = emu_check_device(device);
  if (status != hipSuccess) return emu_ret(status);
  hipDeviceProp_tR0600 p;
  emu_fill_props(&p, device);
  switch (attribute) {
    case emuAttrAsyncEngineCount: *value = p.asyncEngineCount; break;
    case emuAttrCanMapHostMemory: *value = p.canMapHostMemory; break;
    case emuAttrCanUseHostPointerForRegisteredMem: *value = p.canUseHostPointerForRegisteredMem; break;
    case emuAttrClockRate: *value = p.clockRate; break;
    case emuAttrComputeMode: *value = p.computeMode; break;
    case emuAttrConcurrentKernels: *value = p.concurrentKernels; break;
    case emuAttrConcurrentManagedAccess: *value = p.concurrentManagedAccess; break;
    case emuAttrIntegrated: *value = p.integrated; break;
    case emuAttrL2CacheSize: *value = p.l2CacheSize; break;
    case emuAttrComputeCapabilityMajor: *value = p.major; break;
    case emuAttrComputeCapabilityMinor: *value = p.minor; break;
    case emuAttrManagedMemory: *value = p.managedMemory; break;
    case emuAttrMaxBlockDimX: *value = p.maxThreadsDim[0]; break;
    case emuAttrMaxBlockDimY: *value = p.maxThreadsDim[1]; break;
    case emuAttrMaxBlockDimZ: *value = p.maxThreadsDim[2]; break;
    case emuAttrMaxGridDimX: *value = p.maxGridSize[0]; break;
    case emuAttrMaxGridDimY: *value = p.maxGridSize[1]; break;
    case emuAttrMaxGridDimZ: *value = p.maxGridSize[2]; break;
    case emuAttrMaxThreadsPerBlock: *value = p.maxThreadsPerBlock; break;
    case emuAttrMaxThreadsPerMultiProcessor: *value = p.maxThreadsPerMultiProcessor; break;
    case emuAttrMemoryBusWidth: *value = p.memoryBusWidth; break;
    case emuAttrMemoryClockRate: *value = p.memoryClockRate; break;
    case emuAttrMultiprocessorCount: *value = p.multiProcessorCount; break;
    case emuAttrPageableMemoryAccess: *value = p.pageableMemoryAccess; break;
    case emuAttrPciBusId: *value = p.pciBusID; break;
    case emuAttrPciDeviceId: *value = p.pciDeviceID; break;
    case emuAttrPciDomainId: *value = p.pciDomainID; break;
    case emuAttrMaxSharedMemoryPerBlock: *value = (int)p.sharedMemPerBlock; break;
    case emuAttrStreamPrioritiesSupported: *value = p.streamPrioritiesSupported; break;
    case emuAttrUnifiedAddressing: *value = p.unifiedAddressing; break;
    case emuAttrWarpSize: *value = p.warpSize; break;
    case emuAttrMemoryPoolsSupported: *value = p.memoryPoolsSupported; break;
    case emuAttrHostRegisterSupported: *value = p.hostRegisterSupported; break;
    case emuAttrIsLargeBar: *value = p.isLargeBar; break;
    case emuAttrCanUseStreamWaitValue: *value = 1; break; /* streammem.c */
    default: return emu_ret(hipErrorInvalidValue);
  }
  return hipSuccess;
}

EMU_EXPORT hipError_t hipDeviceGetName(char *name, int len, hipDevice_t device) {
  if (name == NULL || len <= 0) return emu_ret(hipErrorInvalidValue);
  hipError_t status = emu_check_device(device);
  if (status != hipSuccess) return emu_ret(status);
  snprintf(name, (size_t)len, "%s", EMU_DEVICE_NAME);
  return hipSuccess;
}

EMU_EXPORT hipError_t hipDeviceGetPCIBusId(char *bus_id, int len, int device) {
  if (bus_id == NULL || len <= 0) return emu_ret(hipErrorInvalidValue);
  hipError_t status = emu_check_device(device);
  if (status != hipSuccess) return emu_ret(status);
  char text[32];
  int n = snprintf(text, sizeof(text), "0000:%02x:00.0", device + 1);
  if (n < 0 || n >= len) return emu_ret(hipErrorInvalidValue);
  memcpy(bus_id, text, (size_t)n + 1);
  return hipSuccess;
}

EMU_EXPORT hipError_t hipDeviceTotalMem(size_t *bytes, hipDevice_t device) {
  if (bytes == NULL) return emu_ret(hipErrorInvalidValue);
  hipError_t status = emu_check_device(device);
  if (status != hipSuccess) return emu_ret(status);
  *bytes = emu_device_memory_total();
  return hipSuccess;
}
