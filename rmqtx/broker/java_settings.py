"""Apache RocketMQ 4.9.8 broker settings rmqtx has no use for, with Java's defaults, for GET_BROKER_CONFIG.

Tools read keys from that answer without checking they exist: ``mqadmin exportConfigs`` stops with a
NullPointerException when ``filterServerNums``, ``slaveReadEnable`` or ``useTLS`` is missing. So the
answer carries every key a Java broker reports; a value from broker.conf replaces the default shown.
Thread counts follow Java's formulas over this machine's cores, although rmqtx runs no such pools.
"""

from __future__ import annotations

import os

#: Settings whose Java default does not depend on the machine.
FIXED_DEFAULTS: dict[str, str] = {
    # BrokerConfig
    "aclEnable": "false", "adminBrokerThreadPoolNums": "16", "autoDeleteUnusedStats": "false",
    "brokerFastFailureEnable": "true", "channelNotActiveInterval": "60000", "clientManageThreadPoolNums": "32",
    "clientManagerThreadPoolQueueCapacity": "1000000", "commercialBaseCount": "1", "commercialBigCount": "1",
    "commercialEnable": "true", "commercialTimerCount": "1", "commercialTransCount": "1", "compressedRegister": "false",
    "consumerFallbehindThreshold": "17179869184", "consumerManageThreadPoolNums": "32",
    "consumerManagerThreadPoolQueueCapacity": "1000000", "debugLockEnable": "false", "defaultQueryMaxNum": "32",
    "disableConsumeIfConsumerReadSlowly": "false", "enableDetailStat": "true", "enableScheduleAsyncDeliver": "false",
    "enableScheduleMessageStats": "true", "endTransactionPoolQueueCapacity": "100000",
    "fetchNamesrvAddrByAddressServer": "false", "filterServerNums": "0", "filterSupportRetry": "false",
    "heartbeatThreadPoolQueueCapacity": "50000", "highSpeedMode": "false", "isolateLogEnable": "false",
    "notifyConsumerIdsChangedEnable": "true", "offsetCheckInSlave": "false", "pullThreadPoolQueueCapacity": "100000",
    "putThreadPoolQueueCapacity": "10000", "sendThreadPoolQueueCapacity": "10000",
    "queryThreadPoolQueueCapacity": "20000", "replyThreadPoolQueueCapacity": "10000",
    "scheduleAsyncDeliverMaxPendingLimit": "2000", "scheduleAsyncDeliverMaxResendNum2Blocked": "3",
    "slaveReadEnable": "false", "startAcceptSendRequestTimeStamp": "0", "storeReplyMessageEnable": "true",
    "waitTimeMillsInHeartbeatQueue": "31000", "waitTimeMillsInPullQueue": "5000", "waitTimeMillsInSendQueue": "200",
    "waitTimeMillsInTransactionQueue": "3000", "isEnableBatchPush": "false", "enableLmq": "false",
    "enableMultiDispatch": "false", "maxLmqConsumeQueueNum": "20000", "configBlackList": "configBlackList;brokerConfigPath",
    # MessageStoreConfig
    "bitMapLengthConsumeQueueExt": "112", "cleanFileForciblyEnable": "true", "commitCommitLogLeastPages": "4",
    "commitCommitLogThoroughInterval": "200", "commitIntervalCommitLog": "200", "deleteCommitLogFilesInterval": "100",
    "deleteConsumeQueueFilesInterval": "100", "destroyMapedFileIntervalForcibly": "120000", "diskFallRecorded": "true",
    "duplicationEnable": "false", "enableDLegerCommitLog": "false", "fastFailIfNoBufferInStorePool": "false",
    "flushCommitLogLeastPages": "4", "flushCommitLogThoroughInterval": "10000", "flushCommitLogTimed": "true",
    "flushConsumeQueueLeastPages": "2", "flushConsumeQueueThoroughInterval": "60000",
    "flushConsumerOffsetHistoryInterval": "60000", "flushDelayOffsetInterval": "10000",
    "flushLeastPagesWhenWarmMapedFile": "4096", "haHousekeepingInterval": "20000", "haSendHeartbeatInterval": "5000",
    "haSlaveFallbehindMax": "268435456", "haTransferBatchSize": "32768", "maxDelayTime": "40", "messageIndexSafe": "false",
    "messageStorePlugIn": "", "osPageCacheBusyTimeOutMills": "1000", "putMsgIndexHightWater": "600000",
    "redeleteHangedFileInterval": "120000", "slaveTimeout": "3000", "transientStorePoolEnable": "false",
    "transientStorePoolSize": "5", "useReentrantLockWhenPutMessage": "true", "warmMapedFileEnable": "false",
    # NettyServerConfig / NettyClientConfig / TLS
    "clientAsyncSemaphoreValue": "65535", "clientChannelMaxIdleTimeSeconds": "120", "clientCloseSocketIfTimeout": "true",
    "clientOnewaySemaphoreValue": "65535", "clientPooledByteBufAllocatorEnable": "false", "clientSocketRcvBufSize": "0",
    "clientSocketSndBufSize": "0", "clientWorkerThreads": "4", "connectTimeoutMillis": "3000",
    "serverAsyncSemaphoreValue": "64", "serverCallbackExecutorThreads": "0", "serverChannelMaxIdleTimeSeconds": "120",
    "serverOnewaySemaphoreValue": "256", "serverPooledByteBufAllocatorEnable": "true", "serverSelectorThreads": "3",
    "serverSocketBacklog": "1024", "serverSocketRcvBufSize": "0", "serverSocketSndBufSize": "0",
    "serverWorkerThreads": "8", "useEpollNativeSelector": "false", "writeBufferHighWaterMark": "0",
    "writeBufferLowWaterMark": "0", "useTLS": "false",
}


def java_defaults(listen_port: int, cores: int | None = None) -> dict[str, str]:
    """Every key above plus those Java derives from the cores, the listen port and the environment."""
    n = cores or os.cpu_count() or 1
    send = min(n, 4)
    out = dict(FIXED_DEFAULTS)
    out.update({
        "sendMessageThreadPoolNums": str(send),
        "putMessageFutureThreadPoolNums": str(min(n, 4)),
        "pullMessageThreadPoolNums": str(16 + n * 2),
        "processReplyMessageThreadPoolNums": str(16 + n * 2),
        "queryMessageThreadPoolNums": str(8 + n),
        "heartbeatThreadPoolNums": str(min(32, n)),
        "endTransactionThreadPoolNums": str(max(8 + n * 2, send * 4)),
        "clientCallbackExecutorThreads": str(n),
        "haListenPort": str(listen_port + 1),  # BrokerStartup: the HA port follows the listen port
        "rocketmqHome": os.environ.get("ROCKETMQ_HOME", ""),
    })
    return out
