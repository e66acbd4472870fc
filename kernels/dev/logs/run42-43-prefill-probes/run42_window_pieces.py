import torch
B,T,H,d,sink,recent=16,512,6,64,128,256
dev,dt='cuda',torch.bfloat16
kv=torch.randn(B,16384,H,2*d,device=dev,dtype=dt)
q=torch.randn(B,T,H,d,device=dev,dtype=dt)
def fl(q,k,v,c,w=None):
    o,l,*_=torch.ops.aten._flash_attention_forward(q,k,v,None,None,q.shape[1],k.shape[1],0.0,c,False,scale=0.125,window_size_left=w,window_size_right=None)
    return o,l
L=8192; w0=L-T-(recent-1)
kw,vw=kv[:,w0:L,:,:d],kv[:,w0:L,:,d:]
ks,vs=kv[:,:sink,:,:d],kv[:,:sink,:,d:]
kwc,vwc=kw.contiguous(),vw.contiguous()
ow,lw=fl(q,kw,vw,True,recent-1); os_,ls=fl(q,ks,vs,False)
def merge():
    w=torch.sigmoid(lw-ls).transpose(1,2).unsqueeze(-1); o=os_.float(); return (o+(ow.float()-o)*w).to(dt)
def t(name,f,n=50):
    f(); torch.cuda.synchronize()
    a,b=torch.cuda.Event(True),torch.cuda.Event(True); a.record()
    for _ in range(n): f()
    b.record(); b.synchronize(); print(f'{name:40s} {a.elapsed_time(b)/n*1000:8.1f} us')
t('window call (strided K/V)',lambda: fl(q,kw,vw,True,recent-1))
t('window call (contiguous K/V)',lambda: fl(q,kwc,vwc,True,recent-1))
t('window call, no window (causal, 767 keys)',lambda: fl(q,kw,vw,True))
t('sink call',lambda: fl(q,ks,vs,False))
t('merge (fp32 torch ops)',merge)
t('full 12 heads causal L=8192',lambda: fl(torch.randn(B,T,12,d,device=dev,dtype=dt),torch.randn(B,L,12,d,device=dev,dtype=dt),torch.randn(B,L,12,d,device=dev,dtype=dt),True),5)
