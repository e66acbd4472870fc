import torch
B,T,H,d,s,r,n=16,512,12,64,128,256,6
dev,dt='cuda',torch.bfloat16
q4=torch.randn(B,H,T,d,device=dev,dtype=dt)[:,6:]
kb=torch.randn(B,n,1200,d,device=dev,dtype=dt);vb=torch.randn_like(kb)
P=8192;L=s+(r-1)+T
sk,sv=kb[:,:,:L],vb[:,:,:L]
kp=torch.cat([torch.arange(s),torch.arange(P-r+1,P+T)]).to(dev)
qp=torch.arange(P,P+T,device=dev)
def masked():
    a=(kp[None]<=qp[:,None])&((kp[None]<s)|(qp[:,None]-kp[None]<r))
    a=a.view(1,1,1,T,L).expand(1,n,1,T,L).reshape(1,n,T,L)
    return torch.nn.functional.scaled_dot_product_attention(q4,sk,sv,attn_mask=a,scale=.125)
def fl(k,v,c,w=None):
    o,l,*_=torch.ops.aten._flash_attention_forward(q4.transpose(1,2),k.transpose(1,2),v.transpose(1,2),None,None,T,k.shape[2],0.0,c,False,scale=.125,window_size_left=w,window_size_right=None)
    return o,l
def window(lerp):
    ow,lw=fl(sk[:,:,s:],sv[:,:,s:],True,r-1); os_,ls=fl(sk[:,:,:s],sv[:,:,:s],False)
    w=torch.sigmoid(lw-ls).transpose(1,2).unsqueeze(-1)
    if lerp: return torch.lerp(os_,ow,w.to(dt))
    o=os_.float(); return (o+(ow.float()-o)*w).to(dt)
def t(name,f,n=50):
    f();torch.cuda.synchronize()
    a,b=torch.cuda.Event(True),torch.cuda.Event(True);a.record()
    for _ in range(n):f()
    b.record();b.synchronize();print(f'{name:36s} {a.elapsed_time(b)/n*1000:8.1f} us')
t('masked (service before)',masked)
t('window+sink+fp32 merge',lambda:window(False))
t('window+sink+lerp merge',lambda:window(True))
ref=masked().transpose(1,2).float()
for l in (False,True):print('lerp' if l else 'fp32','maxdiff vs masked',(window(l).float()-ref).abs().max().item())
